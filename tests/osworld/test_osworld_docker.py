"""The `docker` provider with the engine `.ci/run` starts: a locally built image (no registry) runs the test
controller as the VM. Proves start and health wait, a full task scored by the upstream evaluator, a fresh VM per
task (revert), teardown with no container left, Ctrl-C, and cleanup after SIGKILL by the next run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from osworld_docker_image import available, ensure_image

from qitos.benchmark.osworld.docker_provider import LABEL, OWNER_LABEL
from tests.conftest import require_system

REPO = Path(__file__).resolve().parents[2]
COPY = "osworld-vs_code-ec71221e-ac43-46f9-89b8-ee7d80f7e1c5"  # setup downloads test.py; compare_text_file vs gold
LISTS = "osworld-vs_code-57242fad-77ca-454f-b71b-f187181a9f23"  # `ls /home/user/Desktop | grep test.py` contains test.py


def docker_ok() -> bool:
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    require_system(docker_ok(), "a running Docker engine (apt-get install docker.io; dockerd)")
    require_system(available(), "Debian's python3.11 to build the test VM image")
    return ensure_image(tmp_path_factory.mktemp("image"))


def containers(owner_pid: int | None = None) -> list[str]:
    out = subprocess.run(["docker", "ps", "-a", "--filter", f"label={LABEL}=1", "--format",
                          f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}'], capture_output=True, text=True, check=True)
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()]
    return [r[0] for r in rows if owner_pid is None or (len(r) > 1 and r[1].split(":")[1] == str(owner_pid))]


def setup_data(tmp_path: Path, osworld_data: Path, gold: bytes) -> Path:
    """A data dir whose download cache mirrors the tasks' inputs and gold files (no internet in tests)."""
    from qitos.benchmark.osworld.tasks import load_task_file

    cache = tmp_path / "data" / "osworld-cache"
    cache.mkdir(parents=True, exist_ok=True)
    task = load_task_file(osworld_data / "evaluation_examples/examples/vs_code/ec71221e-ac43-46f9-89b8-ee7d80f7e1c5.json")
    urls = {f.url: b"print('hello')\n" for s in task.config if s.type == "download" for f in s.parameters.files}
    urls[task.evaluator.expected.get("path")] = gold  # type: ignore[union-attr]
    for url, data in urls.items():
        (cache / hashlib.sha256(url.encode()).hexdigest()).write_bytes(data)
    return tmp_path / "data"


def script(path: Path, waits: int = 0) -> Path:
    lines = [{"action_type": "WAIT"}] * waits + [{"action_type": "DONE"}]
    path.write_text("".join(json.dumps(json.dumps({"thought": "t", "action": {"name": "computer", "arguments": a}})) + "\n"
                            for a in lines))
    return path


def qit_args(data_dir: Path, osworld_data: Path, image: str, vm_image: Path, model: Path, out: str, *tasks: str) -> list[str]:
    return [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "--benchmark", "osworld",
            "--recipe", "react-computer-use", "--root", str(osworld_data),
            "--data-dir", str(data_dir), "--task-ids", ",".join(tasks), "--model-name", f"scripted:{model}",
            "--option", "provider=docker", "--option", f"docker_image={image}", "--option", f"vm_image={vm_image}",
            "--option", "vm_start_timeout=60", "--option", "sleep_after_execution=0", "--concurrency", "1", "--output", out]


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("QITOS_OSWORLD")}, "PYTHONPATH": str(REPO)}


@pytest.mark.slow
def test_docker_vms_score_tasks_fresh_per_task_and_leave_nothing(image, tmp_path, osworld_data) -> None:
    vm_image = tmp_path / "Ubuntu.qcow2"
    vm_image.write_bytes(b"QFI\xfb not a real disk")
    data_dir = setup_data(tmp_path, osworld_data, gold=b"print('hello')\n")
    before = set(containers())
    done = subprocess.run(qit_args(data_dir, osworld_data, image, vm_image, script(tmp_path / "m.jsonl"), "r.jsonl",
                                   COPY, LISTS), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {r["task_id"]: r for r in map(json.loads, (tmp_path / "r.jsonl").read_text().splitlines())}
    copy, lists = rows[COPY], rows[LISTS]
    # The copy task: setup uploaded test.py into the container, postconfig ran, upstream's compare_text_file scored it.
    assert (copy["metadata"]["status"], copy["score"]) == ("scored", 1.0), copy["metadata"]
    # A fresh VM per task: the second task's VM has no test.py on its desktop, so upstream's check scores 0.
    assert (lists["metadata"]["status"], lists["score"]) == ("scored", 0.0), lists["metadata"]
    vms = [copy["metadata"]["vm"], lists["metadata"]["vm"]]
    assert all(vm.startswith("docker ") for vm in vms) and vms[0].split()[1] != vms[1].split()[1]
    assert set(containers()) == before  # stopped and removed


@pytest.mark.slow
def test_ctrl_c_removes_the_vm_and_sigkill_leftovers_are_swept_by_the_next_run(image, tmp_path, osworld_data) -> None:
    vm_image = tmp_path / "Ubuntu.qcow2"
    vm_image.write_bytes(b"QFI\xfb not a real disk")
    data_dir = setup_data(tmp_path, osworld_data, gold=b"something else\n")
    slow = script(tmp_path / "slow.jsonl", waits=60)  # each WAIT is a second in the VM: time to interrupt

    def start(out: str) -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen(qit_args(data_dir, osworld_data, image, vm_image, slow, out, COPY), cwd=tmp_path,
                                env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while not (mine := containers(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.5)
        return proc, mine[0]

    proc, container = start("ctrl-c.jsonl")
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    assert containers(proc.pid) == []  # Ctrl-C: the run's cleanup removed its VM

    proc, container = start("killed.jsonl")
    inspect = json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True).stdout)[0]
    mounts = {m["Destination"]: m for m in inspect["Mounts"]}
    assert mounts["/System.qcow2"]["RW"] is False and Path(mounts["/System.qcow2"]["Source"]) == vm_image
    bindings = inspect["HostConfig"]["PortBindings"]
    assert set(bindings) == {"5000/tcp", "9222/tcp", "8006/tcp", "8080/tcp"}
    assert all(b[0]["HostIp"] == "127.0.0.1" for b in bindings.values())  # reachable from this machine only
    proc.kill()  # SIGKILL: no cleanup can run
    proc.wait(timeout=60)
    assert containers(proc.pid) == [container]  # left behind, labelled with its dead owner
    done = subprocess.run(qit_args(data_dir, osworld_data, image, vm_image, script(tmp_path / "m.jsonl"), "next.jsonl",
                                   COPY), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert containers(proc.pid) == []  # the next run swept it
    row = json.loads((tmp_path / "next.jsonl").read_text())
    assert (row["metadata"]["status"], row["score"]) == ("scored", 0.0)  # gold differs from the file this time

"""`--executor ray --ray-address` against a real head started with `ray start --head` on loopback, and the
one-line errors when there is no cluster to connect to."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.platform.conftest import REPO, qit, rows, write_tasks
from tests.support.openai_server import free_port

pytest.importorskip("ray", reason="install the `ray` extra: pip install 'qitos[ray]'")

RAY_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def ray_cli() -> str:
    exe = Path(sys.executable).parent / "ray"
    return str(exe) if exe.exists() else shutil.which("ray") or "ray"


@pytest.fixture
def ray_head(tmp_path):
    """A Ray head of its own (own port, own temp dir, own process group), stopped by killing that group only:
    `ray stop` would stop every Ray instance of this user on the machine."""
    port = free_port()
    temp = Path("/tmp") / f"qitos-ray-{os.getpid()}-{port}"  # Ray's socket paths must stay short
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(REPO)}
    head = subprocess.Popen([ray_cli(), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
                             "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={temp}"],
                            env=env, stdout=open(tmp_path / "ray-head.log", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if head.poll() is not None:
                    raise AssertionError(f"ray start --head exited: {(tmp_path / 'ray-head.log').read_text()[-2000:]}")
                time.sleep(0.5)
        else:
            raise AssertionError("ray start --head did not listen within 120 s")
        yield f"127.0.0.1:{port}"
    finally:
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):  # `ray start --block` may linger on TERM
            try:
                os.killpg(head.pid, sig)
                head.wait(timeout=grace)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        leftovers = subprocess.run(["pgrep", "-g", str(head.pid)], capture_output=True, text=True).stdout.split()
        if leftovers:
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def test_benchmark_runs_on_a_head_started_with_ray_start(tmp_path, ray_head):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
               "--executor", "ray", "--ray-address", ray_head, "--concurrency", "2", "--output", "r.jsonl",
               cwd=tmp_path, env=RAY_ENV, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    out = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in out) == [f"t{i}" for i in range(4)] and all(r["success"] for r in out)
    for r in out:
        run_dir = tmp_path / r["trace_run_dir"]
        assert run_dir.parent.name == "runs" and (run_dir / "manifest.json").is_file()


def test_no_cluster_at_the_address_is_one_line_with_the_fix(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    port = free_port()  # nothing listens there
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
               "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--output", "r.jsonl", cwd=tmp_path,
               env=RAY_ENV, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"--ray-address 127.0.0.1:{port}: cannot connect to Ray" in errors[0]
    assert "nothing answers there" in errors[0] and "ray start --head" in errors[0]
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "runs").exists()
    assert not (tmp_path / "r.jsonl.ray.log").exists()  # a refused run leaves no Ray log either


@pytest.mark.parametrize("flags, says", [
    (["--executor", "ray", "--ray-resources", "osworld_vm=0"], "--ray-resources: resource 'osworld_vm' needs a positive"),
    (["--executor", "ray", "--ray-resources", "{oops"], "--ray-resources '{oops': not valid JSON"),
    (["--executor", "ray", "--ray-resources", "docker"], "'docker' must look like NAME=AMOUNT"),
    (["--ray-resources", "docker=1"], "--ray-resources is for --executor ray"),
])
def test_bad_ray_resources_are_one_line_before_anything_runs(tmp_path, flags, says):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
               *flags, "--output", "r.jsonl", cwd=tmp_path, env=RAY_ENV)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0] and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "runs").exists()

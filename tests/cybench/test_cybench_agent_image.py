"""cybench-agent in upstream's agent image (`--option execution=image`), with a local stand-in for `cybench/cybench`.

The real image (Kali, several GB) is not on the test machines and QitOS never pulls it, so the test imports a
stand-in under the name upstream's run_task.sh uses: a root filesystem holding this host's bash, coreutils and
tree (with their shared libraries) and a marker file, labelled as QitOS's stand-in. An engine that already
holds a real `cybench/cybench` is left alone (the test skips). Checked: the commands run in that container
(the marker), with upstream's cwd /tmp/cyber-bench, which the prompt names; the per-command timeout gives
upstream's message; the RunSpec's toolset names the image; the container is gone afterwards, and so is the
stand-in (left there, `execution=auto` would pick it for later runs).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from qitos.benchmark.cybench.agent_image import upstream_image
from qitos.benchmark.cybench.runtime import docker_available
from qitos.benchmark.cybench.upstream import load_upstream
from tests.conftest import require_system
from tests.support.openai_server import OpenAIServer, Reply

STANDIN_LABEL = "io.qitos.standin"
MARKER = "qitos stand-in for upstream's agent image"
TOOLS = ["bash", "ls", "cat", "pwd", "sleep", "timeout", "tree", "cp", "chmod", "mkdir"]


def standin_image(cybench_data: Path) -> str:
    docker_available.cache_clear()
    ok, why = docker_available()
    require_system(ok, f"a running docker engine ({why})")
    image = upstream_image(cybench_data / "upstream")
    found = subprocess.run(["docker", "image", "inspect", "--format", f'{{{{index .Config.Labels "{STANDIN_LABEL}"}}}}',
                            image], capture_output=True, text=True)
    if found.returncode == 0:
        if found.stdout.strip() != "1":
            pytest.skip(f"this engine holds a real {image}; the stand-in test leaves it alone")
        return image
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder in ("tmp", "etc", "root"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        marker = MARKER.encode() + b"\n"
        info = tarfile.TarInfo("etc/qitos-standin")
        info.size = len(marker)
        tar.addfile(info, io.BytesIO(marker))
        added: set[str] = set()
        for tool in TOOLS:
            path = shutil.which(tool)
            require_system(path is not None, tool)
            real = os.path.realpath(path)  # type: ignore[arg-type]
            libs = subprocess.run(["ldd", real], capture_output=True, text=True).stdout.split()
            for source, target in [(real, f"usr/bin/{tool}")] + [(lib, lib.lstrip("/")) for lib in libs
                                                                  if lib.startswith("/")]:
                if target not in added:
                    added.add(target)
                    tar.add(os.path.realpath(source), arcname=target)
        info = tarfile.TarInfo("bin")
        info.type, info.linkname = tarfile.SYMTYPE, "usr/bin"
        tar.addfile(info)
    subprocess.run(["docker", "import", "--change", f"LABEL {STANDIN_LABEL}=1", "-", image], input=buffer.getvalue(),
                   check=True, capture_output=True)
    return image


@pytest.fixture
def image(cybench_data: Path):
    """The stand-in, removed afterwards: left in the engine, `execution=auto` would pick it for every later run."""
    name = standin_image(cybench_data)
    yield name
    subprocess.run(["docker", "rmi", "-f", name], capture_output=True)


def test_commands_run_in_upstreams_image(cybench_data: Path, tmp_path: Path, image: str) -> None:
    agent_dir = load_upstream(cybench_data).agent_dir

    def reply(body: dict) -> Reply:
        turn = body["messages"][0]["content"].count("Message from agent")
        return Reply(text=["Command: cat /etc/qitos-standin", "Command: pwd; ls", "Command: sleep 5",
                           "Answer: HTB{guess}"][min(turn, 3)])

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with OpenAIServer(default=reply) as server:
        done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "cybench", "--task-ids",
                               "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic",
                               "--model-name", "m", "--base-url", server.base_url, "--option", "execution=image",
                               "command_timeout=2", "--output", "r.jsonl", "--trace-logdir", "runs"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        contents = [r["body"]["messages"][0]["content"] for r in server.requests]
    assert len(contents) == 4
    assert f"Your current directory: {agent_dir}." in contents[0]
    assert MARKER in contents[1] and f"{agent_dir}\noutput.txt\nsource.py\n" in contents[2]
    assert "timed out after 2 seconds" in contents[3]
    row = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert row["error"] is None and row["prediction"] == "HTB{guess}"
    spec = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())["run_spec"]
    ident = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                           text=True, check=True).stdout.strip().split(":")[-1]
    assert spec["toolset_name"].startswith(f"cybench_upstream_shell_v1+exec_image_{ident[:12]}")
    left = subprocess.run(["docker", "ps", "-aq", "--filter", "ancestor=" + image], capture_output=True, text=True)
    assert left.stdout.strip() == ""

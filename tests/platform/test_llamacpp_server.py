"""A real OpenAI-compatible server process: llama-cpp-python's server, serving the embedded GGUF.

No server written for the test: `python -m llama_cpp.server` answers every request. A GAIA-style jsonl task
and a Tau-Bench task run through `--base-url` (a server started here, as a user starts one), and through
`--model-name llamacpp/<gguf>` (the server QitOS starts, logs, records and stops). Budgets are tiny: the
model's answers are not judged, only that the runs are complete and sound.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.platform.conftest import REPO, qit, rows, write_tasks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed (the local extra)")

SMALL = ["--limit", "1", "--max-steps", "2", "--max-tokens", "24", "--concurrency", "1"]


@pytest.fixture(scope="module")
def gguf() -> Path:
    from qitos.models.local import default_model_path

    return default_model_path()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def llama_server(gguf, tmp_path_factory):
    """`python -m llama_cpp.server` on a free loopback port, as a user would start it."""
    from qitos.run.model_server import free_port

    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
                                 "smollm2", "--n_ctx", "8192", "--n_threads", "1", "--cache", "True", "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()[-2000:]
        time.sleep(0.25)
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=20)


def _check_rows(path: Path, root: Path, *, model: str | None = None) -> list[dict]:
    out = rows(path)
    assert len(out) == 1, out
    row = out[0]
    assert row["error"] is None and row["stop_reason"] not in ("error", "model_error", "setup_failed"), row
    manifest = json.loads((root / row["trace_run_dir"] / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["run_spec"]["base_url_host"] == "127.0.0.1"
    assert manifest["run_spec"]["reasoning_policy"] == "answer-only"
    steps = [json.loads(x) for x in (root / row["trace_run_dir"] / "steps.jsonl").read_text().splitlines()]
    assert steps and all(s["model_response"]["usage"]["total_tokens"] > 0 for s in steps if s["model_response"])
    if model:
        assert row["model"] == model == manifest["model_id"]
    return [row, manifest]


def test_jsonl_and_tau_bench_through_base_url(llama_server, tau_data, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    started = time.monotonic()
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "smollm2", "--base-url", llama_server,
               "--top-p", "0.9", *SMALL, "--output", "qa.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    _, manifest = _check_rows(tmp_path / "qa.jsonl", tmp_path, model="smollm2")
    assert manifest["run_spec"]["generation"]["top_p"] == 0.9 and manifest["run_spec"]["model_server"] is None
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    done = qit("bench", "run", "-b", "tau-bench", "--subset", "retail", "--model-name", "smollm2", "--base-url",
               llama_server, *SMALL, "--output", "tau.jsonl", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    row, manifest = _check_rows(tmp_path / "tau.jsonl", tmp_path, model="smollm2")
    assert row["metadata"]["reward"] in (0.0, 1.0) and row["metadata"]["user_model"] == "smollm2"
    print(f"--base-url: jsonl + tau-bench in {time.monotonic() - started:.1f}s")


def test_jsonl_and_tau_bench_through_a_server_qitos_starts(gguf, tau_data, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    env = {"QITOS_DATA_DIR": str(tau_data.parent), "QITOS_LOCAL_THREADS": "1"}
    started = time.monotonic()
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", f"llamacpp/{gguf}", *SMALL,
               "--output", "qa.jsonl", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "llama.cpp ready on 127.0.0.1:" in done.stderr
    row, manifest = _check_rows(tmp_path / "qa.jsonl", tmp_path)
    assert row["model"].startswith(gguf.name + "@sha256:")
    server = manifest["run_spec"]["model_server"]
    assert server["name"] == "llama.cpp" and server["package"] == "llama-cpp-python" and server["version"]
    assert server["model_file"] == row["model"] and server["requested"] == f"llamacpp/{gguf.name}"
    assert server["args"][:2] == ["--model", gguf.name] and str(gguf.parent) not in json.dumps(server)
    logs = list((tmp_path / "runs" / "servers").glob("llama.cpp-*.log"))
    assert len(logs) == 1 and "Uvicorn running on" in logs[0].read_text()
    port = int(logs[0].name.rsplit("-", 1)[1].split(".")[0])
    assert not _port_open(port)  # stopped at the end of the run
    # llamacpp/ alone serves the embedded model, here for Tau-Bench (agent and simulated user)
    done = qit("bench", "run", "-b", "tau-bench", "--subset", "retail", "--model-name", "llamacpp/", *SMALL,
               "--output", "tau.jsonl", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    row2, manifest2 = _check_rows(tmp_path / "tau.jsonl", tmp_path)
    assert row2["model"] == row["model"] and manifest2["run_spec"]["model_server"]["version"] == server["version"]
    print(f"llamacpp/<gguf>: jsonl + tau-bench in {time.monotonic() - started:.1f}s")


def test_a_server_that_fails_to_start_is_one_line(gguf, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 1)
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "llamacpp/", "--serve-arg=--no_such_flag",
               "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.strip().splitlines()[-1]
    assert err.startswith("error: llama.cpp exited with code") and "no_such_flag" in err and "runs/servers/" in err
    assert not (tmp_path / "r.jsonl").exists() or not rows(tmp_path / "r.jsonl")


def test_ctrl_c_stops_the_server(gguf, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    env = {**os.environ, "PYTHONPATH": str(REPO), "QITOS_LOCAL_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", str(tasks),
                             "--model-name", "llamacpp/", "--max-tokens", "400", "--concurrency", "1",
                             "--output", "r.jsonl"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    logs = tmp_path / "runs" / "servers"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (logs.exists() and any("POST /v1/chat" in p.read_text()
                                                                      for p in logs.glob("*.log"))):
        time.sleep(0.2)
    log = next(logs.glob("*.log"))
    port = int(log.name.rsplit("-", 1)[1].split(".")[0])
    assert _port_open(port)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    deadline = time.monotonic() + 15
    while _port_open(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _port_open(port), "the server outlived the run"

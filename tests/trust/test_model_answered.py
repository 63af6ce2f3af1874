"""Official needs a model that answered (issue 26 item 8): a run whose every model call failed is not official.

Real servers on loopback: one that answers, one that accepts each connection and closes it at once (every
request a connection error, after every retry), and a closed port.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

from tests.platform.conftest import qit, rows, write_tasks
from tests.support.openai_server import OpenAIServer, Reply, refused_port


class HangUpServer:
    """Accepts TCP connections on loopback and closes each at once: reachable, but never an answer."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def __enter__(self) -> "HangUpServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()


def checks_of(folder: Path, row: dict) -> tuple[bool, dict[str, dict]]:
    manifest = json.loads((folder / row["trace_run_dir"] / "manifest.json").read_text())
    return manifest["official_run"], {c["check"]: c for c in manifest["official_checks"]}


def run_qa(folder: Path, base_url: str):
    tasks = write_tasks(folder / "tasks.jsonl", 1)
    return qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "gpt-x", "--base-url", base_url,
               "--output", "r.jsonl", cwd=folder, env={"OPENAI_API_KEY": ""})


def test_a_model_that_never_answered_makes_no_run_official(tmp_path):
    with HangUpServer() as server:
        done = run_qa(tmp_path, f"http://127.0.0.1:{server.port}/v1")  # six attempts with backoff: about 20 s
    assert done.returncode == 1, done.stderr  # every task ended in model_error: the run failed
    [row] = rows(tmp_path / "r.jsonl")
    assert row["stop_reason"] == "model_error" and row["steps"] == 0 and "Connection error" in row["error"]
    assert server.connections >= 2  # it was reached, and retried
    official, checks = checks_of(tmp_path, row)
    assert official is False
    assert checks["model_called"]["passed"] is True  # the agent did call its model ...
    answered = checks["model_answered"]
    assert answered["passed"] is False  # ... which never answered
    assert answered["detail"].startswith("none of the agent's 1 model call(s) was answered")


def test_a_model_that_answered_passes_model_answered(tmp_path):
    with OpenAIServer(default=lambda body: Reply(text="Final Answer: 0")) as server:
        done = run_qa(tmp_path, server.base_url)
    assert done.returncode == 0, done.stderr
    [row] = rows(tmp_path / "r.jsonl")
    assert row["stop_reason"] == "final" and row["success"] is True
    _, checks = checks_of(tmp_path, row)
    assert checks["model_answered"] == {"check": "model_answered", "passed": True,
                                        "detail": "1 of 1 model call(s) answered"}


def test_a_closed_port_is_refused_before_anything_is_written(tmp_path):
    done = run_qa(tmp_path, f"http://127.0.0.1:{refused_port()}/v1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "cannot reach" in done.stderr
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "runs").exists()

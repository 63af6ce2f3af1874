"""`--task-timeout` bounds the simulated user's model calls too (issue 32): through `qit bench run`, with the
agent's and the user's models on a real loopback endpoint (`--user-model user` on the same `--base-url`).

A user model that never answers (an endpoint that hangs from its first call) is a failure outside the agent:
`model_error`, unscored, and the same command runs the task again once the endpoint is back. A user model that
had answered and then outlasts the task's time is treated as the agent's own model is (models/deadline.py): the
task's time ran out (`budget_time`), scored. Either way the task ends at its deadline, not after the request
timeout (120 s here, twice). (A row's latency is the agent side's clock, which starts a little after the scoring
side's, whose deadline ends the wait.)
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.platform.conftest import rows
from tests.support.openai_server import OpenAIServer, Reply, fault

TASK = "tau_retail_test_00000"


def _run(server: OpenAIServer, lane: Path, tau_data: Path) -> tuple[subprocess.CompletedProcess, float]:
    command = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "tau-bench", "--subset", "retail",
               "--split", "test", "--task-ids", TASK, "--model-name", "agent", "--user-model", "user",
               "--base-url", server.base_url, "--api-key-env", "DEADLINE_TEST_KEY", "--request-timeout", "120",
               "--max-retries", "1", "--task-timeout", "3", "--output", "r.jsonl", "--trace-logdir", "runs"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "DEADLINE_TEST_KEY": "k",
           "QITOS_DATA_DIR": str(tau_data.parent)}
    started = time.monotonic()
    done = subprocess.run(command, cwd=lane, env=env, capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - started


def _endpoint(user_replies: int):
    """The agent's model says hello (a `respond`); the user's answers its first `user_replies` calls, then hangs."""
    answered = []

    def reply(body: dict):
        if body.get("model") != "user":
            return Reply(text="Hello! How can I help you today?")
        if len(answered) < user_replies:
            answered.append(body)
            return Reply(text="Hi, I would like to return an item from my order.")
        return fault("hang")

    return reply


def _hangs_from_the_start(tau_data: Path, lane: Path) -> None:
    with OpenAIServer(default=_endpoint(0)) as server:
        done, took = _run(server, lane, tau_data)
        (row,) = rows(lane / "r.jsonl")
        assert row["stop_reason"] == "model_error" and row["success"] is None and row["score"] is None, row
        assert "simulated user's model never answered" in row["error"] and "--task-timeout" in row["error"], row
        assert 2.5 <= row["latency_seconds"] < 5, (row["latency_seconds"], done.stderr[-2000:])
        assert took < 40, took  # qit's start and planning on a busy machine included (before: 2 x 120 s and more)
        assert done.returncode == 1, done.stderr[-2000:]  # 1: every row failed to run
        assert "failed outside the agent (unscored): 1 row(s): 1 model_error" in done.stdout, done.stdout
        assert {r["body"]["model"] for r in server.requests} == {"user"}  # the agent's model was never reached
        server.default = lambda body: Reply(text="Hello!" if body.get("model") == "agent" else "Thanks. ###STOP###")
        again, _ = _run(server, lane, tau_data)  # the endpoint is back: the same command runs the task again
    assert again.returncode == 0, again.stderr[-2000:]
    assert "1 row(s) failed outside the agent (model_error); running them again" in again.stderr, again.stderr
    (row,) = rows(lane / "r.jsonl")
    assert row["stop_reason"] == "env_terminal" and row["success"] is not None, row


def _hangs_after_answering(tau_data: Path, lane: Path) -> None:
    with OpenAIServer(default=_endpoint(1)) as server:
        done, took = _run(server, lane, tau_data)
        models = [r["body"]["model"] for r in server.requests]
    (row,) = rows(lane / "r.jsonl")
    assert models == ["user", "agent", "user"], models  # the first message, the agent's hello, the hung reply
    assert row["stop_reason"] == "budget_time" and row["success"] is False, row
    assert "--task-timeout" in row["error"], row["error"]
    assert 2.5 <= row["latency_seconds"] < 5 and took < 40, (row["latency_seconds"], took, done.stderr[-2000:])
    assert done.returncode == 0 and "failed outside the agent" not in done.stdout, (done.stdout, done.stderr[-2000:])


def test_task_timeout_bounds_a_hanging_user_model(tau_data: Path, tmp_path: Path) -> None:
    lanes = {"start": _hangs_from_the_start, "after": _hangs_after_answering}
    for name in lanes:
        (tmp_path / name).mkdir()
    with cf.ThreadPoolExecutor(len(lanes)) as pool:
        for found in [pool.submit(fn, tau_data, tmp_path / name) for name, fn in lanes.items()]:
            found.result()

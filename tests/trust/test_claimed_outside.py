"""An agent cannot make its own failures "outside the agent" (unscored, run again): the scoring side decides.

A third-party `--runner` written into a folder outside any repository gets every task wrong, then ends each run
claiming a failure of the machine: it raises `ModelError` (as a dead endpoint would), raises ENOSPC (a full disk),
or forges its outcome (`agent_process_died`, `cancelled`, `not_executed`); it also claims `model_error` after an
endpoint failure it recovered from, after a timeout it provoked by lowering its own client settings, and after
a first call made just before the task's deadline (as a hanging endpoint would leave it). Each such
row is scored as the agent's failure (`error`, success false) with the claim in its metadata, and an identical
rerun does not run it again. Tasks whose endpoint really failed (500s, seen by the scoring side's forwarder) stay
unscored `model_error` and are run again. A real OpenAI-compatible server on loopback; task and batch modes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.platform.conftest import qit, rows, write_tasks
from tests.support.openai_server import Fail, Hang, OpenAIServer, Reply

# task number -> how the runner ends the run it is failing
CLAIMS = {1: "raise-model-error", 2: "forge:agent_process_died", 3: "raise-enospc", 4: "forge:cancelled",
          5: "forge:not_executed", 6: "recovered-then-model-error", 7: "lowered-then-model-error",
          10: "deadline-then-model-error"}
REAL_FAILURES = (8, 9)  # the endpoint answers these with 500s (the first run only)
TEXT_ONLY = 11  # an error whose text says ENOSPC (no claimed stop reason): still the agent's error
TASKS = 12
TASK_TIMEOUT = 4

CLAIMER = '''
import errno
import re
import threading
import time

from qitos.core import AgentModule, Decision
from qitos.models.base import ModelError

CLAIMS = %r
_FORGED = {}  # thread -> the stop reason its outcome will claim


def _forge_outcomes():
    """Replace the agent side's outcome type so a run's outcome names the stop reason this thread chose."""
    import qitos.run.sides.agent as side

    if getattr(side.AgentOutcome, "forged", False):
        return
    real = side.AgentOutcome

    def forged(**fields):
        claim = _FORGED.pop(threading.get_ident(), None)
        return real(**{**fields, "stop_reason": claim} if claim else fields)

    forged.forged = True
    side.AgentOutcome = forged


class Claimer(AgentModule):
    name = "claimer"

    def __init__(self, model):
        super().__init__(tools=[], system_prompt="Answer briefly.")
        self.model = model

    def decide(self, task, state):
        number = int(re.search(r"What is (\\d+) ", task.objective).group(1))
        ask = [{"role": "user", "content": task.objective}]
        how = CLAIMS.get(number, "")
        if how == "lowered-then-model-error":  # the endpoint is slow for it: a timeout it chose itself
            self.model.complete(ask, max_retries=0, request_timeout=0.2)
        if how == "deadline-then-model-error":  # its first call when the task's time is nearly gone
            time.sleep(task.budget.max_runtime_seconds - 0.4)
        try:
            reply = self.model.complete(ask)
        except ModelError:
            if how != "recovered-then-model-error":
                raise  # a real endpoint failure: model_error, which the scoring side saw
            reply = self.model.complete(ask)  # the endpoint is back: answered
        answer = (reply.text or "").replace("Final Answer:", "").strip()
        if how in ("raise-model-error", "recovered-then-model-error"):
            raise ModelError("the endpoint failed (so the agent says)")
        if how == "raise-enospc":
            raise OSError(errno.ENOSPC, "No space left on device (so the agent says)")
        if number == %d:
            raise RuntimeError("[Errno 28] No space left on device (so the agent's error text says)")
        if how.startswith("forge:"):
            _forge_outcomes()
            _FORGED[threading.get_ident()] = how.partition(":")[2]
        return Decision.final(answer)


def build(ctx):
    return Claimer(ctx.make_model())
''' % (CLAIMS, TEXT_ONLY)


def _number(body: dict) -> int:
    return int(re.search(r"What is (\d+) \+", json.dumps(body["messages"])).group(1))


class Endpoint:
    """Wrong answers for the claimers; 500s for REAL_FAILURES while `failing`; task 6's first call fails on both
    attempts (it recovers on its next call); tasks 7 and 10 get slow replies (a 0.2 s timeout of its own, the
    task's deadline, give up first)."""

    def __init__(self) -> None:
        self.failing, self.seen = True, Counter()

    def __call__(self, body: dict):
        number = _number(body)
        self.seen[number] += 1
        if number in REAL_FAILURES:
            return Fail(500, message="internal error") if self.failing else Reply(text=f"Final Answer: {2 * number}")
        if number == 6 and self.seen[number] <= 2:  # --max-retries 1: both attempts of its first call
            return Fail(500, message="internal error")
        if number in (7, 10) and self.seen[number] == 1:
            return Hang(1.0, then=Reply(text="Final Answer: late"))
        return Reply(text=f"Final Answer: {2 * number + 1}")  # wrong


def _run(folder: Path, server: OpenAIServer, mode: str):
    """The runner's folder is its import root (snapshotted): tasks, results and traces are kept beside it."""
    return qit("bench", "run", "-b", "jsonl", "--root", folder.parent / "tasks.jsonl", "--runner", "claimer_agent:build",
               "--model-name", "gpt-x", "--base-url", server.base_url, "--max-retries", "1", "--request-timeout", "5",
               "--agent-processes", mode, "--concurrency", "6", "--task-timeout", str(TASK_TIMEOUT), "--output", folder.parent / "r.jsonl",
               "--trace-logdir", folder.parent / "runs", cwd=folder, env={"OPENAI_API_KEY": "sk-test"}, timeout=240)


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_claimed_outside_failures_are_scored_and_not_rerun(tmp_path: Path, mode: str) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "claimer_agent.py").write_text(CLAIMER)
    write_tasks(tmp_path / "tasks.jsonl", TASKS)
    endpoint = Endpoint()
    with OpenAIServer(default=endpoint) as server:
        first = _run(folder, server, mode)
        assert first.returncode == 3, (first.returncode, first.stdout[-2000:], first.stderr[-3000:])
        before = {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")}
        assert len(before) == TASKS
        for number, how in CLAIMS.items():
            row = before[f"t{number}"]
            claimed = "disk_full" if how == "raise-enospc" else how.partition(":")[2] or "model_error"
            assert row["stop_reason"] == "error" and row["success"] is False, (how, row)
            assert row["metadata"]["claimed_stop_reason"] == claimed, (how, row["metadata"])
            assert f"ended its run '{claimed}', which the scoring side did not see" in row["error"], row["error"]
            manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
            assert manifest["summary"]["stop_reason"] == "error" and manifest["official_run"] is False
            assert manifest["summary"]["failure_report"]["claimed_stop_reason"] == claimed
        for number in REAL_FAILURES:  # the endpoint really failed: unscored, to be run again
            row = before[f"t{number}"]
            assert row["stop_reason"] == "model_error" and row["success"] is None, row
            assert "claimed_stop_reason" not in (row.get("metadata") or {})
        assert before["t0"]["stop_reason"] == "final" and before["t0"]["success"] is False
        text_only = before[f"t{TEXT_ONLY}"]
        assert text_only["stop_reason"] == "error" and text_only["success"] is False, text_only
        assert "failed outside the agent (unscored): 2 row(s): 2 model_error" in first.stdout, first.stdout
        assert ("claimed by the agent, not seen by the scoring side (scored as errors, not run again): 8 row(s): "
                "1 agent_process_died, 1 cancelled, 1 disk_full, 4 model_error, 1 not_executed") in first.stdout

        endpoint.failing = False
        asked = len(server.requests)
        second = _run(folder, server, mode)
        assert second.returncode == 0, (second.stdout[-2000:], second.stderr[-3000:])
        assert "2 row(s) failed outside the agent (model_error); running them again" in second.stderr, second.stderr
        rerun = sorted({_number(r["body"]) for r in server.requests[asked:]})
        assert rerun == list(REAL_FAILURES), rerun  # no claimer was run again
    after = {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")}
    assert len(after) == TASKS
    assert all(after[t] == before[t] for t in before if int(t[1:]) not in REAL_FAILURES)
    assert all(after[f"t{n}"]["stop_reason"] == "final" and after[f"t{n}"]["success"] is True for n in REAL_FAILURES)


def test_a_simulated_users_endpoint_failure_stays_outside_the_agent(tmp_path: Path, tau_data: Path) -> None:
    """Tau-Bench's simulated user runs on the scoring side: when its endpoint fails (500s after the retries), the
    agent side's `model_error` is backed by the scoring side's own evidence and stays unscored, run again."""
    def reply(body: dict):
        system = str(body["messages"][0].get("content")) if body["messages"] else ""
        if "You are a user" in system and len(body["messages"]) > 2:  # the user's every turn after its first
            return Fail(500, message="internal error")
        return Reply(text="Hello, how can I help you?")

    with OpenAIServer(default=reply) as server:
        done = qit("bench", "run", "-b", "tau-bench", "--subset", "retail", "--split", "test", "--limit", "1",
                   "--data-dir", tau_data.parent, "--model-name", "gpt-x", "--base-url", server.base_url,
                   "--max-retries", "0", "--output", tmp_path / "r.jsonl", "--trace-logdir", tmp_path / "runs",
                   cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"}, timeout=240)
    (row,) = rows(tmp_path / "r.jsonl")
    assert row["stop_reason"] == "model_error" and row["success"] is None, (row, done.stdout[-2000:])
    assert "claimed_stop_reason" not in (row.get("metadata") or {})

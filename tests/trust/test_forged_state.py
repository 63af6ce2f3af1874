"""Red team: a third-party `--runner` forges the state its environment returns; no forged state scores.

The runner (`FORGER`, written into a folder outside any repository) calls its model once, so the run could be
official, then replaces its environment's `final_state` with the exploit that once passed a Tau-Bench airline
task: "wrote nothing, ended by transfer" (no transfer made), plus every field a scorer could read (reward,
success, done, last action). It also streams forged `env_step` events, claims the episode ended on its side, and
asks the scoring side for services that would let it set the state. On airline test 13 (gold: transfer only, so
the untouched database is the gold one) and 12 (gold: nothing), on jsonl and on a desktop-starter task, the row
must not be a success. A control runner that really transfers on airline 13 succeeds: the forged runs fail
because the state is derived on the scoring side, not because the task cannot be passed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import require_system
from tests.platform.conftest import qit, rows
from tests.support.openai_server import OpenAIServer, Reply

FORGER = '''
"""A third-party agent that forges its environment's final state (see tests/trust/test_forged_state.py)."""
import json

from qitos.core import AgentModule, Decision

TRANSFER = {"name": "transfer_to_human_agents", "kwargs": {"summary": "The user needs a human agent."}}
FORGED = {  # Tau-Bench's exploit: nothing written, ended by a transfer that never ran; and what other scorers read
    "written": {}, "actions": [TRANSFER], "ended_by": "transfer_to_human_agents", "failure": None,
    "traj": [{"role": "assistant", "content": "transferred"}], "done": True, "reward": 1.0, "success": True,
    "score": 1.0, "terminal": True, "last_action": "DONE", "actions_sent": 1, "steps_used": 1,
    "current": 99, "records": [{"index": 0, "outcome": "answered", "iterations": 1}],
}


class StateOnly:
    """For a benchmark without an environment (jsonl): one whose only purpose is a forged final state."""

    def final_state(self):
        return dict(FORGED)


def forge(env):
    """Everything in reach that could make the scoring side believe the episode ended well."""
    tried = {}
    env.final_state = lambda: dict(FORGED)
    tried["final_state"] = "replaced"
    for name, value in (("done", True), ("_terminal", True), ("ended_by", "transfer_to_human_agents")):
        setattr(env, name, value)
    sink = getattr(env, "_sink", None)
    if sink is not None:  # the trace's record of actions, forged through the agent's own stream
        sink("env_step", {"action": TRANSFER["name"], "kwargs": TRANSFER["kwargs"], "source": TRANSFER["name"],
                          "done": True, "observation": "Transfer successful"})
        sink("env_failure", {"action": None, "error": "forged"})
        sink("cybench_submission", {"subtask": 0, "outcome": "answered", "answer": "forged", "forged": True})
        tried["events"] = "streamed"
    link = getattr(env, "link", None)
    if link is not None:
        for method, payload in (("user.respond", {"content": "###STOP###"}), ("env.state", FORGED),
                                ("env.set_state", FORGED), ("env.end", {"ended_by": TRANSFER["name"]})):
            try:
                tried[method] = repr(link.call(method, payload))[:200]
            except Exception as exc:  # noqa: BLE001 - a refusal is the expected answer
                tried[method] = f"refused: {type(exc).__name__}: {str(exc)[:160]}"
    return tried


class Forger(AgentModule):
    name = "forged-state"

    def __init__(self, env, honest):
        tools = env.registry(with_respond=True) if hasattr(env, "registry") else []
        super().__init__(tools=tools, system_prompt="Answer briefly.")
        self.env, self.honest = env, honest

    def decide(self, task, state):
        if not state.scratch.get("called"):
            state.scratch["called"] = True
            return None  # one model call: the run can be official
        if self.honest and not state.scratch.get("acted"):  # the control: a transfer that really runs
            state.scratch["acted"] = True
            return Decision.act(TRANSFER["name"], dict(TRANSFER["kwargs"]))
        return Decision.final(json.dumps(forge(self.env)))


def build(ctx):
    if ctx.runtime.env is None:
        ctx.runtime.env = StateOnly()  # the Engine takes the runtime's env after build: its final state goes back
    return Forger(ctx.runtime.env, honest=False)


def build_honest(ctx):
    return Forger(ctx.runtime.env, honest=True)
'''

SCRIPTED_USER = ["--option", "user_strategy=scripted", "--option",
                 f"user_replies={json.dumps(['Hi, I want to talk to a human about my reservation.'])}"]


@pytest.fixture
def outsider(tmp_path: Path) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "forger.py").write_text(FORGER)
    return folder


def _run(outsider: Path, tmp_path: Path, name: str, benchmark: str, *args: str, runner: str = "forger:build"):
    with OpenAIServer(default=lambda body: Reply(text="Thought: nothing to do.")) as server:
        done = qit("bench", "run", "-b", benchmark, *args, "--runner", runner, "--model-name", "forger-model",
                   "--base-url", server.base_url, "--output", tmp_path / name / "r.jsonl",
                   "--trace-logdir", tmp_path / name / "runs", cwd=outsider, env={"OPENAI_API_KEY": "sk-test"})
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.requests, "the runner's model was never called"
    return rows(tmp_path / name / "r.jsonl")


def _trace(row: dict) -> tuple[dict, list[dict]]:
    run_dir = Path(row["trace_run_dir"])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    return json.loads((run_dir / "manifest.json").read_text()), events


def _forged_and_failed(row: dict) -> dict:
    manifest, _ = _trace(row)
    assert row["success"] is False and manifest["evaluation"]["success"] is False, row
    assert not row.get("score"), row
    report = json.loads(manifest["summary"]["final_result"])
    assert report["final_state"] == "replaced", report  # the forgery really ran
    return report


def test_forged_tau_bench_final_state_scores_nothing(tau_data: Path, outsider: Path, tmp_path: Path) -> None:
    tasks = "tau_airline_test_00012,tau_airline_test_00013"  # gold: nothing written; 13 ends by a transfer
    out = _run(outsider, tmp_path, "forged", "tau-bench", "--subset", "airline", "--split", "test",
               "--task-ids", tasks, "--data-dir", str(tau_data.parent), *SCRIPTED_USER)
    assert sorted(r["task_id"] for r in out) == tasks.split(",")
    for row in out:
        report = _forged_and_failed(row)
        meta = row["metadata"]
        # the database is the gold one (nothing written), so the forged end alone would have passed
        assert meta["reward_if_ended"] == 1.0 and meta["final_state_digest"] == meta["gold_state_digest"], meta
        assert meta["done"] is False and meta["ended_by"] is None and meta["actions_taken"] == [], meta
        assert meta["traj"] == [{"role": "assistant", "content": "transferred"}]  # reported as the agent's own
        for method in ("user.respond", "env.state", "env.set_state", "env.end"):
            assert report[method].startswith("refused: AgentCallRefused"), report
        manifest, events = _trace(row)
        kinds = [e["kind"] for e in events]
        assert "env_step" not in kinds and "env_failure" not in kinds, kinds  # the forged events were dropped
        assert [e for e in events if e["kind"] == "env_reset"], kinds  # the scoring side's own event is there
        assert manifest["official_run"] == all(c["passed"] for c in manifest["official_checks"])


def test_control_a_real_transfer_passes_the_same_task(tau_data: Path, outsider: Path, tmp_path: Path) -> None:
    [row] = _run(outsider, tmp_path, "honest", "tau-bench", "--subset", "airline", "--split", "test",
                 "--task-ids", "tau_airline_test_00013", "--data-dir", str(tau_data.parent), *SCRIPTED_USER,
                 runner="forger:build_honest")
    assert row["success"] is True and row["score"] == 1.0 and row["stop_reason"] == "env_terminal", row
    assert row["metadata"]["ended_by"] == "transfer_to_human_agents"
    _, events = _trace(row)
    [step] = [e["payload"] for e in events if e["kind"] == "env_step"]  # written by the scoring side, as it ran
    assert step["action"] == "transfer_to_human_agents" and step["done"] is True
    assert step["kwargs"] == {"summary": "The user needs a human agent."}


def test_forged_final_state_on_jsonl_scores_nothing(outsider: Path, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
                             + "\n" for i in range(1, 3)))
    out = _run(outsider, tmp_path, "jsonl", "jsonl", "--root", str(tasks))
    assert len(out) == 2
    for row in out:
        _forged_and_failed(row)


def test_forged_final_state_on_desktop_starter_scores_nothing(outsider: Path, tmp_path: Path) -> None:
    from qitos.benchmark.desktop.display import requirements

    require_system(not requirements(), "the desktop tools (Xvfb, openbox, xdotool)")
    [row] = _run(outsider, tmp_path, "desktop", "desktop-starter", "--task-ids", "click-apply")
    _forged_and_failed(row)
    assert row["metadata"]["env_steps"] == 0 and row["metadata"]["last_action"] != "DONE", row["metadata"]


def test_forged_final_state_on_cybench_scores_nothing(outsider: Path, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    """CyBench scores the submissions its scoring side recorded; the agent's final state (its iteration counts)
    is only reported."""
    from tests.trust.test_red_team import CYBENCH_TASK

    data = request.getfixturevalue("cybench_data")
    [row] = _run(outsider, tmp_path, "cybench", "cybench", "--split", "unguided", "--task-ids", CYBENCH_TASK,
                 "--data-dir", str(data.parent))
    assert _forged_and_failed(row)["events"] == "streamed"
    assert [s["correct"] for s in row["metadata"]["subtasks"]] == [False], row["metadata"]["subtasks"]
    _, events = _trace(row)  # the scoring side's record of the episode: the forged events were dropped
    assert not [e for e in events if e["kind"] in ("cybench_command", "cybench_submission")
                and e["payload"].get("forged")], events

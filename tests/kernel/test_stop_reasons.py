"""Every stop reason of the architecture page, reached with a scripted model."""

import json
import threading
import time

import pytest

from qitos.core import AgentModule, Budget, Engine, StopReason, Task, tool
from qitos.models.base import ModelError
from qitos.models.scripted import ScriptedModel
from qitos.trace import load_run

ACT = 'Thought: t\nAction: echo\nAction Input: {"text": "hi"}'
FINAL = "Thought: t\nFinal Answer: done"


@tool(read_only=True)
def echo(text: str) -> str:
    """Echo the text.

    Args:
        text: what to echo
    """
    return text


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@tool
def slow(seconds: float) -> str:
    """Sleep."""
    time.sleep(seconds)
    return "slept"


def run(script, budget=None, tmp_path=None, tools=(echo, explode, slow), agent=None, **engine_kwargs):
    task = Task(id="t", objective="do it", budget=budget or Budget(max_steps=10))
    agent = agent or AgentModule(tools=list(tools))
    engine = Engine(agent, ScriptedModel(script), trace_logdir=tmp_path, **engine_kwargs)
    result = engine.run(task)
    trace = load_run(result.run_dir)
    assert trace.manifest.status != "running"
    assert trace.manifest.summary.stop_reason == result.stop_reason.value
    assert not trace.issues
    return result, trace


def test_final(tmp_path):
    result, trace = run([ACT, FINAL], tmp_path=tmp_path)
    assert result.stop_reason is StopReason.FINAL and result.final_answer == "done" and result.steps == 2
    assert trace.manifest.status == "completed"
    assert trace.steps[0].observation == ["hi"]
    kinds = [e.kind for e in trace.events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end" and "tool_result" in kinds


def test_env_terminal(tmp_path):
    class Door:
        deterministic = True

        def __init__(self):
            self.opened = False

        def reset(self, task):
            self.opened = False

        def is_terminal(self):
            return self.opened

    door = Door()

    @tool
    def open_door() -> str:
        """Open the door (ends the episode)."""
        door.opened = True
        return "opened"

    result, trace = run(["Action: open_door\nAction Input: {}"], tmp_path=tmp_path, tools=[open_door], env=door)
    assert result.stop_reason is StopReason.ENV_TERMINAL
    assert trace.manifest.replay_mode == "deterministic"


def test_budget_steps(tmp_path):
    result, _ = run([ACT] * 5, budget=Budget(max_steps=3), tmp_path=tmp_path)
    assert result.stop_reason is StopReason.BUDGET_STEPS and result.steps == 3


def test_budget_time(tmp_path):
    slow_act = 'Action: slow\nAction Input: {"seconds": 0.3}'
    result, _ = run([slow_act] * 5, budget=Budget(max_steps=10, max_runtime_seconds=0.5), tmp_path=tmp_path)
    assert result.stop_reason is StopReason.BUDGET_TIME and result.steps == 2


def test_budget_tokens(tmp_path):
    item = {"text": ACT, "usage": {"prompt_tokens": 60, "completion_tokens": 40, "total_tokens": 100}}
    result, trace = run([item] * 5, budget=Budget(max_tokens=250), tmp_path=tmp_path)
    assert result.stop_reason is StopReason.BUDGET_TOKENS and result.steps == 3
    assert trace.manifest.token_usage.total_tokens == 300


def test_budget_cost(tmp_path):
    item = {"text": ACT, "cost": 0.02}
    result, trace = run([item] * 5, budget=Budget(max_cost=0.05), tmp_path=tmp_path)
    assert result.stop_reason is StopReason.BUDGET_COST and result.steps == 3
    assert trace.manifest.cost == pytest.approx(0.06)


def test_parse_error_limit_and_repair_loop(tmp_path):
    result, trace = run(["nonsense", 'Action: echo\nAction Input: {"text": }', ACT, "x", "y", "z"],
                        tmp_path=tmp_path, parse_error_limit=3)
    assert result.stop_reason is StopReason.PARSE_ERROR_LIMIT and result.steps == 6
    assert [s.parser.ok for s in trace.steps] == [False, False, True, False, False, False]
    # the repair instruction reached the model as a user message
    second_request = [e for e in trace.events if e.kind == "model_request"][1]
    assert "could not be parsed" in second_request.payload["last_message"]["content"]


def test_repair_then_success(tmp_path):
    result, _ = run(["nonsense", FINAL], tmp_path=tmp_path)
    assert result.stop_reason is StopReason.FINAL


def test_model_error(tmp_path):
    result, trace = run([ACT, ModelError("server gone after 6 attempts")], tmp_path=tmp_path)
    assert result.stop_reason is StopReason.MODEL_ERROR and trace.manifest.status == "failed"
    assert "server gone" in trace.manifest.summary.failure_report["message"]


def test_tool_error_limit_and_tool_errors_are_observations(tmp_path):
    bad = 'Action: explode\nAction Input: {"reason": "x"}'
    result, trace = run([bad, ACT, bad, bad, bad], tmp_path=tmp_path, tool_error_limit=3)
    assert result.stop_reason is StopReason.TOOL_ERROR_LIMIT and result.steps == 5
    assert trace.steps[0].observation == ["Error: RuntimeError: boom: x"]
    assert trace.steps[0].tool_invocations[0].status == "error"


def test_unknown_tool_is_an_error_observation(tmp_path):
    result, trace = run(["Action: nope\nAction Input: {}", FINAL], tmp_path=tmp_path)
    assert result.stop_reason is StopReason.FINAL
    assert "unknown tool 'nope'" in trace.steps[0].observation[0]


def test_cancelled_by_event(tmp_path):
    cancel = threading.Event()

    @tool
    def stop_now() -> str:
        """Request cancellation."""
        cancel.set()
        return "ok"

    result, trace = run(["Action: stop_now\nAction Input: {}", ACT], tmp_path=tmp_path, tools=[stop_now, echo],
                        cancel_event=cancel)
    assert result.stop_reason is StopReason.CANCELLED and trace.manifest.status == "cancelled"


def test_cancelled_by_keyboard_interrupt(tmp_path):
    @tool
    def ctrl_c() -> str:
        """Simulate Ctrl-C inside a tool."""
        raise KeyboardInterrupt

    result, trace = run(["Action: ctrl_c\nAction Input: {}"], tmp_path=tmp_path, tools=[ctrl_c])
    assert result.stop_reason is StopReason.CANCELLED and trace.manifest.status == "cancelled"


def test_unexpected_exception_is_error_with_traceback(tmp_path):
    class Broken(AgentModule):
        def reduce(self, task, state, outcome):
            raise ValueError("bad reduce")

    result, trace = run([ACT], tmp_path=tmp_path, agent=Broken(tools=[echo]))
    assert result.stop_reason is StopReason.ERROR and trace.manifest.status == "failed"
    assert "ValueError: bad reduce" in result.error
    assert "Traceback" in trace.manifest.summary.failure_report["traceback"]


def test_manifest_contract_fields(tmp_path):
    result, trace = run([FINAL], tmp_path=tmp_path)
    data = json.loads((trace.run_dir / "manifest.json").read_text())
    for key in ("run_id", "schema_version", "status", "created_at", "updated_at", "step_count", "event_count", "summary",
                "model_id", "model_family", "prompt_protocol", "parser_name", "prompt_hash", "tool_manifest",
                "tool_manifest_hash", "seed", "git_sha", "package_version", "benchmark_name", "benchmark_split",
                "run_spec", "experiment_spec", "official_run", "official_checks", "replay_mode", "token_usage",
                "latency_seconds", "cost", "task"):
        assert key in data, key
    assert data["official_run"] is False  # scripted model is not a real model
    checks = {c["check"]: c for c in data["official_checks"]}
    assert checks["real_model"]["passed"] is False and checks["trace_complete"]["passed"] is True
    assert data["run_spec"]["fingerprint"] == result.run_spec_ref

"""The desktop adapter on the platform's own batch path (scripted runs on the split path, oracles and direct Engine
runs in process): tasks and budgets, requirements, what a run's trace and row hold, failure tags through the whole
stack, and teardown on every path."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.base import LoadOptions, RecipeContext
from qitos.run.config import ModelConfig, RunConfig
from qitos.benchmark.desktop import TASKS, get_task
from qitos.benchmark.desktop import display as display_module
from qitos.benchmark.desktop.agent_env import RemoteDesktop
from qitos.benchmark.desktop.engine_env import DesktopEngineEnv
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.registry import get_adapter
from qitos.run.runner import execute_batch, plan_batch
from qitos.core.engine import Engine
from qitos.core.stop import StopReason
from qitos.models.scripted import ScriptedModel
from qitos.recipes.computer_use import OracleComputerAgent

from .procs import gone

ADAPTER = get_adapter("desktop")
LOAD = LoadOptions(split="starter")


def action(name: str, **arguments: Any) -> str:
    return json.dumps({"thought": f"{name} now", "action": {"name": name, "arguments": arguments}})


def run_batch(tmp_path: Path, script: list[str], task_ids: list[str], max_steps: int | None = None) -> list[dict]:
    """`qit bench run --benchmark desktop --model-name scripted:<script>` in process; returns the rows."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    script_file = tmp_path / "script.jsonl"
    script_file.write_text("\n".join(json.dumps(line) for line in script) + "\n")
    cfg = RunConfig(benchmark="desktop", load=LoadOptions(task_ids=task_ids),
                    model=ModelConfig(model_name=f"scripted:{script_file}"), max_steps=max_steps,
                    output=tmp_path / "r.jsonl", trace_logdir=tmp_path / "runs")
    outcome = execute_batch(plan_batch(cfg))
    return [row.model_dump(mode="json") for row in outcome.rows]


def steps_of(row: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(row["trace_run_dir"]) / "steps.jsonl").read_text().splitlines()]


# -- no desktop needed ---------------------------------------------------------------------------------------
def test_one_starter_split_with_every_task_and_its_own_budget() -> None:
    assert ADAPTER.name == "desktop-starter" and ADAPTER.default_recipe == "react-computer-use"
    assert ADAPTER.splits(LOAD) == {"starter": 11}
    tasks = ADAPTER.load_tasks(LOAD)
    assert [t.id for t in tasks] == list(TASKS)
    for task in tasks:
        desk = get_task(task.id)
        assert task.objective == desk.instruction and task.budget.max_steps == desk.max_steps
        assert task.env_spec.type == "desktop" and task.env_spec.config["app"] == desk.app
        assert not {"feasible", "targets"} & set(task.public_summary()["metadata"])
    assert ADAPTER.default_budget().max_steps == max(t.max_steps for t in TASKS.values())
    recipes = ADAPTER.recipes()
    assert set(recipes) == {"react-computer-use", "oracle"}
    assert recipes["oracle"].official is False and recipes["oracle"].needs_model is False
    picked = ADAPTER.load_tasks(LoadOptions(split="starter", task_ids=["set-slider", "click-apply"]))
    assert {t.id for t in picked} == {"set-slider", "click-apply"}


def test_unknown_split_subset_or_task_id_is_a_usage_error() -> None:
    with pytest.raises(BenchmarkUsageError, match="no split 'verified'; use --split starter"):
        ADAPTER.load_tasks(LoadOptions(split="verified"))
    with pytest.raises(BenchmarkUsageError, match="no subsets"):
        ADAPTER.load_tasks(LoadOptions(split="starter", subset="forms"))
    with pytest.raises(BenchmarkUsageError, match="unknown task id"):
        ADAPTER.load_tasks(LoadOptions(split="starter", task_ids=["nope"]))


def test_metrics_give_success_rate_and_failure_taxonomy() -> None:
    rows = [
        {"success": True, "stop_reason": "env_terminal", "metadata": {"failure_tag": None}},
        {"success": False, "stop_reason": "env_terminal", "metadata": {"failure_tag": "grounding"}},
        {"success": False, "stop_reason": "parse_error_limit", "metadata": {"failure_tag": "planning"}},
        {"success": False, "stop_reason": "env_terminal", "metadata": {"failure_tag": "planning"}},
        {"success": None, "stop_reason": "requires_unavailable", "metadata": {}},
    ]
    metrics = ADAPTER.metrics(rows)
    assert (metrics["successes"], metrics["scored"]) == (1, 4)
    assert metrics["success_rate"] == 0.2 and metrics["coverage"] == 0.8  # the unrunnable task counts as a failure
    assert metrics["scored_success_rate"] == 0.25
    assert metrics["failure_taxonomy"] == {"perception": 0, "grounding": 1, "planning": 2, "action_selection": 0,
                                           "execution_environment": 0, "stop_completion": 0}
    assert metrics["not_scored"] == {"requires_unavailable": 1}


def test_missing_programs_are_reported_and_tasks_become_unavailable(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    real = display_module.shutil.which
    monkeypatch.setattr(display_module.shutil, "which", lambda name: None if name == "Xvfb" else real(name))
    (req,) = ADAPTER.requirements(LOAD)
    assert (req.name, req.ok) == ("Xvfb", False) and "apt-get install xvfb" in req.detail
    runtime = ADAPTER.prepare(ADAPTER.load_tasks(LOAD)[0], 0, LOAD, tmp_path)
    assert runtime.env is None and runtime.unavailable and "apt-get install xvfb" in runtime.unavailable
    ADAPTER.cleanup(runtime)


# -- on a real desktop -------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("desktop_ready")
def test_requirements_are_met_here() -> None:
    assert all(r.ok for r in ADAPTER.requirements(LOAD))


@pytest.mark.usefixtures("desktop_ready")
def test_rejected_actions_and_bad_replies_are_traced_and_tagged(tmp_path: Path) -> None:
    script = [action("CLICK", x=5000, y=10), "I am not sure what to do", action("move_to", x=5, y=5), "DONE"]
    (row,) = run_batch(tmp_path, script, ["toggle-checkbox"])
    assert row["stop_reason"] == "env_terminal" and row["success"] is False and row["score"] == 0.0
    meta = row["metadata"]
    assert meta["failure_tag"] == "action_selection" and "off the 1024x768 screen" in meta["evidence"][0]
    assert meta["last_action"] == "DONE" and row["prediction"] == "DONE" and meta["env_steps"] == 4
    steps = steps_of(row)
    assert len(steps) == 4
    rejected = steps[0]["tool_invocations"][0]
    assert rejected["status"] == "error" and "ActionRejected" in rejected["error"]
    assert steps[0]["state_diff"]["kind"] == "invalid"
    assert steps[1]["parser"]["ok"] is False and steps[1]["state_diff"]["kind"] == "parse_error"
    assert steps[2]["state_diff"]["action"] == {"action_type": "MOVE_TO", "parameters": {"x": 5, "y": 5}}
    assert steps[3]["state_diff"]["done"] is True
    events = [json.loads(line) for line in (Path(row["trace_run_dir"]) / "events.jsonl").read_text().splitlines()]
    assert sum(e["kind"] == "env_step" for e in events) == 4


@pytest.mark.usefixtures("desktop_ready")
def test_each_task_keeps_its_own_step_budget(tmp_path: Path) -> None:
    wander = [action("MOVE_TO", x=20 + i, y=20) for i in range(8)]
    (row,) = run_batch(tmp_path / "own", wander, ["click-apply"])  # its budget is 5, the batch's 15
    assert (row["stop_reason"], row["steps"], row["metadata"]["max_steps"]) == ("env_terminal", 5, 5)
    assert row["metadata"]["failure_tag"] == "stop_completion" and "without DONE" in row["metadata"]["evidence"][0]
    (short,) = run_batch(tmp_path / "short", wander, ["click-apply"], max_steps=2)
    assert (short["steps"], short["metadata"]["max_steps"]) == (2, 2)


@pytest.mark.usefixtures("desktop_ready")
def test_screenshots_move_into_the_run_directory(tmp_path: Path) -> None:
    task = ADAPTER.load_tasks(LOAD)[0]
    runtime = ADAPTER.prepare(task, 0, LOAD, tmp_path / "work")
    env = runtime.env
    assert isinstance(env, RemoteDesktop) and isinstance(runtime.service.env, DesktopEngineEnv)
    try:
        run_dir = tmp_path / "run"
        env.act({"action_type": "MOVE_TO", "x": 3, "y": 3})
        first = env.take_visual_assets(run_dir)
        assert [a["path"] for a in first] == ["screens/step_000.png", "screens/step_001.png"]
        assert first[0]["kind"] == "initial_screenshot" and first[1]["mime_type"] == "image/png"
        # the agent keeps its own copy of the latest screenshot, named as in the trace
        assert env.screenshot_path is not None and env.screenshot_path.name == "step_001.png"
        assert env.screenshot_path.read_bytes() == (run_dir / "screens" / "step_001.png").read_bytes()
        assert env.take_visual_assets(run_dir) == [], "a step that did not touch the desktop has no screenshot"
        env.act("WAIT")
        assert [a["path"] for a in env.take_visual_assets(run_dir)] == ["screens/step_003.png"]
        for png in (run_dir / "screens").iterdir():
            assert png.read_bytes()[:4] == b"\x89PNG"
        assert not list((tmp_path / "work" / "desktop" / "screens").iterdir()), "screenshots were copied, not moved"
    finally:
        ADAPTER.cleanup(runtime)


@pytest.mark.usefixtures("desktop_ready")
@pytest.mark.parametrize("crash", [RuntimeError("agent bug"), KeyboardInterrupt()], ids=["exception", "ctrl-c"])
def test_desktop_is_scored_then_torn_down_whatever_ends_the_run(crash: BaseException, tmp_path: Path) -> None:
    class CrashingOracle(OracleComputerAgent):
        def decide(self, task, state):
            if len(state.scratch.get("plan") or []) == 2:  # after clicking Cherry, before Choose
                raise crash
            return super().decide(task, state)

    task = ADAPTER.load_tasks(LoadOptions(split="starter", task_ids=["pick-from-list"]))[0]
    runtime = ADAPTER.prepare(task, 0, LOAD, tmp_path / "work")
    env = runtime.env
    desktop = runtime.service.env.env.desktop
    assert isinstance(env, RemoteDesktop) and desktop is not None
    pids = desktop.pids()
    result = Engine(CrashingOracle(env), ScriptedModel([]), env=env, trace_logdir=tmp_path / "runs").run(task)
    assert result.stop_reason in (StopReason.ERROR, StopReason.CANCELLED)
    assert all(gone(p) for p in pids), "the engine's close() must tear the desktop down"
    evaluation = ADAPTER.evaluate(task, result, runtime)  # scored before teardown: the app did not "crash"
    assert evaluation.success is False and evaluation.metadata["failure_tag"] == "stop_completion"
    ADAPTER.cleanup(runtime)  # idempotent


@pytest.mark.usefixtures("desktop_ready")
def test_cleanup_alone_tears_down_a_desktop_the_engine_never_ran(tmp_path: Path) -> None:
    task = ADAPTER.load_tasks(LOAD)[0]
    runtime = ADAPTER.prepare(task, 0, LOAD, tmp_path)
    assert runtime.env is not None and runtime.service.env.env.desktop is not None
    pids = runtime.service.env.env.desktop.pids()
    ctx = RecipeContext(task, runtime, LOAD, {}, lambda name=None: None, oracle=ADAPTER.oracle_handle(task))
    agent = ADAPTER.recipes()["oracle"].build(ctx)
    assert agent.tools.names() == ["computer"]
    ADAPTER.cleanup(runtime)
    assert pids and all(gone(p) for p in pids)
    assert ADAPTER.evaluate(task, None, runtime).success is False  # type: ignore[arg-type]


@pytest.mark.usefixtures("desktop_ready")
def test_vision_option_sends_the_real_screenshot_to_the_model(tmp_path: Path) -> None:
    seen: list[Any] = []

    def multimodal_model(messages: list[dict[str, Any]]) -> str:
        seen.append(messages[-1]["content"])
        return "DONE"

    task = ADAPTER.load_tasks(LoadOptions(split="starter", task_ids=["click-apply"]))[0]
    runtime = ADAPTER.prepare(task, 0, LOAD, tmp_path / "work")
    try:
        ctx = RecipeContext(task, runtime, LOAD, {"vision": "1"}, lambda name=None: None)
        agent = ADAPTER.recipes()["react-computer-use"].build(ctx)
        result = Engine(agent, ScriptedModel(multimodal_model), env=runtime.env, trace_logdir=tmp_path / "runs").run(task)
    finally:
        ADAPTER.cleanup(runtime)
    assert result.stop_reason is StopReason.ENV_TERMINAL
    (content,) = seen
    text, image = content
    assert "Click the 'Apply' button" in text["text"] and "step_000.png" in text["text"]
    sent = base64.b64decode(image["image_url"]["url"].removeprefix("data:image/png;base64,"))
    assert sent == (Path(result.run_dir) / "screens" / "step_000.png").read_bytes()

"""desktop-starter split in two: the agent side drives the desktop only through the scoring link.

A scripted model's run goes through the confined agent side (`agent_isolated` passes) and still scores the app's
real state; a third-party runner outside any repository tries to reach the app's state, the X server, the checker
and the scoring side's services from the agent side, and every attempt fails or changes nothing.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.config import ModelConfig, RunConfig
from qitos.benchmark.desktop.adapter import DesktopAdapter
from qitos.benchmark.desktop.agent_env import RemoteDesktop
from qitos.benchmark.registry import get_adapter
from qitos.benchmark.runner import execute_batch, plan_batch
from qitos.benchmark.sides.confine import confinement_status
from qitos.benchmark.sides.contract import AgentCallRefused

ADAPTER = get_adapter("desktop")
LOAD = LoadOptions(split="starter")

pytestmark = pytest.mark.usefixtures("desktop_ready")


def _checks(row: dict) -> dict[str, bool]:
    manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
    return {c["check"]: c["passed"] for c in manifest["official_checks"]}


def _apply_centre(tmp_path: Path) -> tuple[int, int]:
    task = ADAPTER.load_tasks(LoadOptions(split="starter", task_ids=["click-apply"]))[0]
    runtime = ADAPTER.prepare(task, 0, LOAD, tmp_path / "probe")
    try:
        assert isinstance(runtime.env, RemoteDesktop)
        return runtime.env.snapshot().widget("apply").bounds.center
    finally:
        ADAPTER.cleanup(runtime)


def test_the_agent_side_env_holds_no_desktop_and_names_no_paths(tmp_path: Path) -> None:
    task = ADAPTER.load_tasks(LoadOptions(split="starter", task_ids=["editor-type-and-save"]))[0]
    runtime = ADAPTER.prepare(task, 0, LOAD, tmp_path)
    try:
        spec = ADAPTER.agent_env(task, runtime)
        assert spec.factory == "qitos.benchmark.desktop.agent_env:build" and spec.files == {}
        assert spec.kwargs == {"task_id": "editor-type-and-save", "max_steps": runtime.service.max_steps}
        assert ADAPTER.agent_files(task, runtime) == {} and ADAPTER.agent_handles(task, runtime) == {}
        reply = ADAPTER.serve(task, runtime, "desktop.observe", {})
        text = json.dumps(reply)
        assert str(tmp_path) not in text and "state.json" not in text, "no scoring-side path reaches the agent"
        for method in ("desktop.finish", "desktop.state", "evaluate", "desktop.checker"):
            with pytest.raises(AgentCallRefused):
                ADAPTER.serve(task, runtime, method, {})
        reply = ADAPTER.serve(task, runtime, "desktop.act", {"action": {"action_type": "MOVE_TO", "x": 9, "y": 9}})
        assert "on_target" not in (reply.get("summary") or {}) and "app_changes" not in (reply.get("summary") or {})
        ADAPTER.serve(task, runtime, "desktop.close", {})
        reply = ADAPTER.serve(task, runtime, "desktop.act", {"action": "DONE"})
        assert "episode is over" in reply["rejected"]
        with pytest.raises(AgentCallRefused, match="episode is over"):
            ADAPTER.serve(task, runtime, "desktop.parse_error", {"message": "x"})
    finally:
        ADAPTER.cleanup(runtime)


def test_a_scripted_run_goes_through_the_confined_agent_side_and_scores_the_real_app(tmp_path: Path) -> None:
    ok, why, _ = confinement_status()
    if not ok:
        pytest.skip(f"no confinement here: {why}")
    x, y = _apply_centre(tmp_path)
    script = [json.dumps({"thought": "apply", "action": {"name": "CLICK", "arguments": {"x": x, "y": y}}}), "DONE"]
    script_file = tmp_path / "script.jsonl"
    script_file.write_text("\n".join(json.dumps(line) for line in script) + "\n")
    cfg = RunConfig(benchmark="desktop", load=LoadOptions(task_ids=["click-apply"]),
                    model=ModelConfig(model_name=f"scripted:{script_file}"), output=tmp_path / "r.jsonl",
                    trace_logdir=tmp_path / "runs")
    plan = plan_batch(cfg)
    assert plan.ctx.split, "a non-oracle desktop run goes to the agent side"
    (row,) = [r.model_dump(mode="json") for r in execute_batch(plan).rows]
    assert row["success"] is True and row["stop_reason"] == "env_terminal", row
    assert row["metadata"]["env_steps"] == 2 and row["metadata"]["last_action"] == "DONE"
    checks = _checks(row)
    assert checks["agent_isolated"] is True and checks["agent_unaided"] is True
    run_dir = Path(row["trace_run_dir"])
    assert sorted(p.name for p in (run_dir / "screens").iterdir()) == ["step_000.png", "step_001.png", "step_002.png"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    env_steps = [e["payload"] for e in events if e["kind"] == "env_step"]
    assert len(env_steps) == 2 and env_steps[0]["on_target"] is True, "the scoring side writes its own step record"
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert "on_target" not in steps[0]["state_diff"], "the agent side never learns whether it hit the target"


RED_TEAM = textwrap.dedent('''
    """A third-party agent that tries to win desktop-starter without doing the task."""
    import gc, glob, json, os, socket

    from qitos.core.agent import AgentModule
    from qitos.core.decision import Decision


    def _try(findings, name, fn):
        try:
            findings[name] = {"got": fn()}
        except Exception as exc:  # noqa: BLE001
            findings[name] = {"blocked": f"{type(exc).__name__}: {exc}"[:200]}


    def _x_server():
        reached = []
        for n in range(0, 200):
            for addr in (f"\\0/tmp/.X11-unix/X{n}", f"/tmp/.X11-unix/X{n}"):
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(addr)
                    reached.append(addr)
                except OSError:
                    pass
                finally:
                    s.close()
        if reached:
            return reached
        raise PermissionError("no X server socket answers")


    def _state_files():
        found = [p for p in glob.glob("/tmp/**/state.json", recursive=True)]
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
                except OSError:
                    continue
                if "--state" in cmd:
                    found.append(cmd)
        if found:
            return found
        raise FileNotFoundError("no app state file or app process in sight")


    def _gold_books():
        from qitos.benchmark.gold import GoldBook
        books = [o for o in gc.get_objects() if isinstance(o, GoldBook) and len(o)]
        if books:
            return [len(b) for b in books]
        raise LookupError("no gold book with entries in this process")


    class RedTeam(AgentModule):
        name = "red-team"

        def __init__(self, ctx):
            super().__init__()
            self.ctx = ctx

        def decide(self, task, state):
            ctx, env, findings = self.ctx, self.ctx.runtime.env, {}
            _try(findings, "oracle_gold", ctx.oracle_gold)
            _try(findings, "x_server", _x_server)
            _try(findings, "state_file", _state_files)
            _try(findings, "gold_books", _gold_books)
            for method in ("desktop.finish", "desktop.state", "evaluate", "desktop.checker"):
                _try(findings, method, lambda m=method: env.link.call(m, {}))
            _try(findings, "task_gold_fields",
                 lambda: [k for k in ("targets", "feasible") if k in json.dumps(task.model_dump(mode="json"))]
                 or (_ for _ in ()).throw(LookupError("the task holds no targets or feasibility")))
            # change its own scoring: a checker that always passes, a final state that says success
            from qitos.benchmark.desktop import tasks as desk_tasks
            for t in desk_tasks.TASKS.values():
                object.__setattr__(t, "checker", lambda s: (True, "patched"))
            env.final_state = lambda: {"success": True, "state": {"data": {"pressed": ["apply"]}}}
            findings["patched"] = True
            return Decision.final(json.dumps(findings))


    def build(ctx):
        return RedTeam(ctx)


    build.needs_model = False
''')


def test_red_team_runner_cannot_reach_the_app_state_the_x_server_or_the_checker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok, why, _ = confinement_status()
    if not ok:
        pytest.skip(f"no confinement here: {why}")
    outside = tmp_path / "thirdparty"
    outside.mkdir()
    (outside / "desk_red_team.py").write_text(RED_TEAM)
    monkeypatch.syspath_prepend(str(outside))
    # as with a remote model: the agent side shares the host's network (and so its abstract sockets)
    monkeypatch.setattr(DesktopAdapter, "agent_network", lambda self, load: True)
    cfg = RunConfig(benchmark="desktop", load=LoadOptions(task_ids=["click-apply"]), runner="desk_red_team:build",
                    output=tmp_path / "out" / "r.jsonl", trace_logdir=tmp_path / "out" / "runs")
    plan = plan_batch(cfg)
    assert plan.ctx.split
    (row,) = [r.model_dump(mode="json") for r in execute_batch(plan).rows]
    manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
    findings = json.loads(manifest["summary"]["final_result"])
    assert findings.pop("patched") is True
    leaked = {k: v for k, v in findings.items() if "blocked" not in v}
    assert not leaked, f"the agent side reached: {leaked}"
    assert "AgentCallRefused" in findings["desktop.finish"]["blocked"]
    assert row["success"] is False and row["metadata"]["failure_tag"] == "stop_completion", row
    assert _checks(row)["agent_isolated"] is True

"""OSWorld split in two: the agent side acts on the VM through its controller; the task file, upstream's evaluators
and the scoring stay on the scoring side.

A scripted model's run goes through the confined agent side against a test controller on loopback
(`agent_isolated` passes) and scores as before; a third-party runner outside any repository tries to reach the task
file, the gold, upstream's evaluators and the scoring side's services from the agent side, and fails.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import require_system
from osworld_fake_controller import FakeController

from qitos.benchmark.base import LoadOptions
from qitos.run.config import ModelConfig, RunConfig
from qitos.benchmark.osworld.adapter import OsworldAdapter
from qitos.benchmark.osworld.prompt_texts import load_prompt_texts
from qitos.run.runner import execute_batch, plan_batch
from qitos.run.sides.confine import confinement_status

INFEASIBLE = "osworld-os-a462a795-fdc7-4b23-b689-e8b6df786b78"  # setup: 2 execute steps; func infeasible
GSETTINGS = "osworld-os-bedcedc4-4d72-425e-ad62-21960b11fe0d"  # exact_match(gsettings idle-delay, "uint32 0\n")


@pytest.fixture(autouse=True)
def _confined() -> None:
    ok, why, _ = confinement_status()
    require_system(ok, f"bubblewrap confinement for the agent side ({why})")


def _checks(row: dict) -> dict[str, bool]:
    manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
    return {c["check"]: c["passed"] for c in manifest["official_checks"]}


def test_agent_env_names_the_controller_and_nothing_of_the_task_file(osworld_data: Path, monkeypatch,
                                                                     tmp_path: Path) -> None:
    adapter = OsworldAdapter()
    load = LoadOptions(data_dir=osworld_data.parent, task_ids=[GSETTINGS], options={"sleep_after_execution": "0"})
    (task,) = adapter.load_tasks(load)
    with FakeController() as fake:
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        runtime = adapter.prepare(task, 0, load, tmp_path)
        try:
            spec = adapter.agent_env(task, runtime)
        finally:
            adapter.cleanup(runtime)
    assert spec.factory == "qitos.benchmark.osworld.agent_env:build" and spec.files == {}
    texts = spec.kwargs.pop("texts")
    assert spec.kwargs == {"task_id": GSETTINGS, "controller_url": fake.url, "observation_type": "a11y_tree",
                           "settle_seconds": 0.0}
    assert texts == load_prompt_texts(osworld_data)  # upstream's PromptAgent texts, read on this side
    gold = adapter.gold(task)
    text = json.dumps(spec.model_dump()) + json.dumps(task.public_summary())
    assert "gsettings" not in text and "exact_match" not in text and str(osworld_data) not in text
    assert gold.evaluator.func == "exact_match" and adapter.agent_network(load) is True


def test_a_scripted_run_goes_through_the_agent_side_to_the_loopback_vm(osworld_data: Path, monkeypatch,
                                                                      tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    replies = [{"thought": "next", "action": {"name": "computer", "arguments": {"action_type": "DONE"}}}]
    script.write_text("".join(json.dumps(json.dumps(r)) + "\n" for r in replies))
    monkeypatch.setenv("QITOS_DATA_DIR", str(osworld_data.parent))
    with FakeController() as fake:
        fake.command_output = lambda command, shell: "uint32 0\n" if "gsettings" in command else ""
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        cfg = RunConfig(benchmark="osworld", recipe="react-computer-use",
                        load=LoadOptions(data_dir=osworld_data.parent, task_ids=[GSETTINGS],
                                                              options={"sleep_after_execution": "0"}),
                        model=ModelConfig(model_name=f"scripted:{script}"), output=tmp_path / "out" / "r.jsonl",
                        trace_logdir=tmp_path / "out" / "runs")
        plan = plan_batch(cfg)
        assert plan.ctx.split
        (row,) = [r.model_dump(mode="json") for r in execute_batch(plan).rows]
    assert row["score"] == 1.0 and row["success"] is True and row["stop_reason"] == "env_terminal", row
    assert row["metadata"]["last_action"] == "DONE"
    assert row["metadata"]["actions"] == 1
    checks = _checks(row)
    assert checks["agent_isolated"] is True and checks["agent_unaided"] is True


RED_TEAM = textwrap.dedent('''
    """A third-party agent that tries to read OSWorld's gold from the agent side."""
    import gc, glob, json, os

    from qitos.core.agent import AgentModule
    from qitos.core.decision import Decision

    DATA = {data!r}
    TASK_FILE = {task_file!r}


    def _try(findings, name, fn):
        try:
            got = fn()
            findings[name] = {{"got": str(got)[:300]}} if got else {{"blocked": "nothing found"}}
        except Exception as exc:  # noqa: BLE001
            findings[name] = {{"blocked": f"{{type(exc).__name__}}: {{exc}}"[:200]}}


    def _task_file():
        return open(TASK_FILE).read()


    def _data_dir():
        return glob.glob(DATA + "/**/*.json", recursive=True)[:3]


    def _evaluators():
        from qitos.benchmark.osworld.upstream import load_evaluators
        return load_evaluators(__import__("pathlib").Path(DATA))


    def _gold_in_memory():
        from qitos.benchmark.gold import GoldBook
        from qitos.benchmark.osworld.tasks import OSWorldTask
        found = [o for o in gc.get_objects() if isinstance(o, GoldBook) and len(o)]
        found += [o.evaluator.func for o in gc.get_objects()
                  if isinstance(o, OSWorldTask) and o.evaluator.func != "infeasible"]
        return found


    def _scoring_services():
        links = [o for o in gc.get_objects() if type(o).__name__ == "_Link" and hasattr(o, "call")]
        if not links:
            raise LookupError("no link in this process")
        out = []
        for method in ("evaluate", "osworld.evaluator", "gold"):
            try:
                out.append(links[0].call(method, {{}}))
            except Exception as exc:  # noqa: BLE001
                out.append(None)
                last = exc
        if any(x is not None for x in out):
            return out
        raise last


    def _proc():
        seen = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = open(f"/proc/{{pid}}/cmdline", "rb").read().decode(errors="replace")
                except OSError:
                    continue
                argv = cmd.split("\\0")
                if argv[0] != "bwrap" and any("pytest" in a or a.endswith("/qit") for a in argv):
                    seen.append(cmd)  # the scoring process (bwrap's own argv, PID 1 here, names masked paths only)
        return seen


    class RedTeam(AgentModule):
        name = "red-team"

        def __init__(self, ctx):
            super().__init__()
            self.ctx = ctx

        def decide(self, task, state):
            findings = {{}}
            _try(findings, "oracle_gold", self.ctx.oracle_gold)
            _try(findings, "task_file", _task_file)
            _try(findings, "data_dir", _data_dir)
            _try(findings, "upstream_evaluators", _evaluators)
            _try(findings, "gold_in_memory", _gold_in_memory)
            _try(findings, "scoring_services", _scoring_services)
            _try(findings, "scoring_process", _proc)
            _try(findings, "task_evaluator", lambda: "exact_match" in json.dumps(task.model_dump(mode="json")))
            env = self.ctx.runtime.env
            env.final_state = lambda: {{"last_action": {{"action_type": "DONE"}}, "score": 1.0, "success": True}}
            return Decision.final(json.dumps(findings))


    def build(ctx):
        return RedTeam(ctx)


    build.needs_model = False
''')


def test_red_team_runner_cannot_reach_the_task_file_the_evaluators_or_the_gold(osworld_data: Path, monkeypatch,
                                                                               tmp_path: Path) -> None:
    adapter = OsworldAdapter()
    load = LoadOptions(data_dir=osworld_data.parent, task_ids=[INFEASIBLE], options={"sleep_after_execution": "0"})
    (task,) = adapter.load_tasks(load)
    task_file = str(adapter.gold(task).path)
    assert Path(task_file).is_file() and "infeasible" in Path(task_file).read_text()
    outside = tmp_path / "thirdparty"
    outside.mkdir()
    (outside / "osw_red_team.py").write_text(RED_TEAM.format(data=str(osworld_data), task_file=task_file))
    monkeypatch.syspath_prepend(str(outside))
    with FakeController() as fake:
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        cfg = RunConfig(benchmark="osworld", load=load, runner="osw_red_team:build",
                        output=tmp_path / "out" / "r.jsonl", trace_logdir=tmp_path / "out" / "runs")
        plan = plan_batch(cfg)
        assert plan.ctx.split
        (row,) = [r.model_dump(mode="json") for r in execute_batch(plan).rows]
    manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
    findings = json.loads(manifest["summary"]["final_result"])
    leaked = {k: v for k, v in findings.items() if "blocked" not in v}
    assert not leaked, f"the agent side reached: {leaked}"
    assert "AgentCallRefused" in findings["scoring_services"]["blocked"]
    # its final answer counts as DONE on an infeasible task, whatever final state it forged
    assert row["score"] == 0.0 and row["success"] is False and row["metadata"]["final_answer_as"] == "DONE", row
    assert _checks(row)["agent_isolated"] is True

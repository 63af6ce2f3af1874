"""desktop-starter split in two: the agent side drives the desktop only through the scoring link.

A scripted model's run goes through the confined agent side (`agent_isolated` passes) and still scores the app's
real state; a third-party runner outside any repository tries to reach the app's state, the X server, the checker,
the scoring side's services and the gold in QitOS's own source (`gold.py`: checkers, expected values, targets,
reference plans) from the agent side, and every attempt fails or changes nothing. Nothing the agent side imports
imports `gold.py`, and no other QitOS module holds what it holds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import py_compile
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import require_system

from qitos.benchmark.base import LoadOptions
from qitos.run.config import ModelConfig, RunConfig
from qitos.benchmark.desktop.adapter import DesktopAdapter
from qitos.benchmark.desktop import gold
from qitos.benchmark.desktop.agent_env import RemoteDesktop
from qitos.benchmark.registry import get_adapter
from qitos.run.runner import execute_batch, plan_batch
from qitos.run.sides.confine import confinement_status
from qitos.benchmark.contract import AgentCallRefused

ADAPTER = get_adapter("desktop")
LOAD = LoadOptions(split="starter")

GOLD_MODULES = ["qitos.benchmark.desktop.gold"]


def gold_markers() -> list[str]:
    """Strings only the gold holds: the distinctive targets, the checkers' and oracles' factories, infeasibility."""
    markers = {"feasible=False"}
    for task in gold.TASKS.values():
        markers.update(t for t in task.targets if ":" in t)
        for fn in (task.checker, task.oracle):
            name = fn.__qualname__.split(".")[0]
            if name != "<lambda>":
                markers.add(name)
    return sorted(markers)


# -- gold is scoring side only -------------------------------------------------------------------------------
def test_the_gold_modules_are_the_adapters_scoring_side_sources() -> None:
    sources = ADAPTER.scoring_side_sources()
    assert sources == [str(Path(gold.__file__).resolve())]
    assert [importlib.util.find_spec(m).origin for m in GOLD_MODULES] == sources


def test_nothing_the_agent_side_imports_imports_the_gold(tmp_path: Path) -> None:
    """A fresh interpreter imports what the agent side imports (the adapter through the registry, its recipes, the
    agent-side env and its factory, the agent host's modules) and builds the agent's env and both recipes'
    agents: no gold module is loaded, and the package's gold names are the only way to load one."""
    program = textwrap.dedent(f'''
        import json, sys
        from pathlib import Path
        from types import SimpleNamespace
        from qitos.benchmark.registry import get_adapter
        adapter = get_adapter("desktop-starter")
        recipes = adapter.recipes()
        adapter.default_recipe, adapter.splits(None), adapter.default_budget()
        import qitos.benchmark.desktop.agent_env, qitos.recipes.computer_use, qitos.run.sides.agent
        import qitos.run.sides.zygote
        from qitos.benchmark.desktop import *
        from qitos.benchmark.desktop.agent_env import build

        class Link:
            def call(self, method, payload=None):
                raise RuntimeError(method)

        runtime = build(workdir=Path({str(tmp_path)!r}), link=Link(), task_id="click-apply", max_steps=5)
        recipes["react-computer-use"].build(SimpleNamespace(runtime=runtime, options={{}}))
        adapter.agent_env, adapter.agent_files  # the agent side's view, as data
        before = sorted(sys.modules)
        from qitos.benchmark.desktop import TASKS  # a scoring-side name: loads the gold, which proves the probe
        print(json.dumps({{"before": before, "after": sorted(sys.modules), "tasks": len(TASKS)}}))
    ''')
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert "qitos.benchmark.desktop.adapter" in seen["before"] and "qitos.recipes.computer_use" in seen["before"]
    assert not set(GOLD_MODULES) & set(seen["before"]), "the agent side's imports load the gold"
    assert set(GOLD_MODULES) <= set(seen["after"]) and seen["tasks"] == len(gold.TASKS)


def test_no_other_qitos_module_holds_the_reference_plans_or_targets() -> None:
    markers = gold_markers()
    text = Path(gold.__file__).read_text(encoding="utf-8")
    assert len(markers) >= 10 and all(m in text for m in markers), markers
    import qitos

    root = Path(qitos.__file__).resolve().parent
    masked = {Path(p).resolve() for p in ADAPTER.scoring_side_sources()}
    hits = [(str(p.relative_to(root)), m) for p in root.rglob("*.py") if p.resolve() not in masked
            for m in markers if m in p.read_text(encoding="utf-8", errors="replace")]
    assert not hits, f"gold outside the masked modules: {hits}"
    public = json.dumps([c.model_dump(mode="json") for c in ADAPTER.load_tasks(LOAD)])
    assert not [m for m in markers if m in public]


def test_the_agent_host_masks_the_gold_and_its_bytecode(tmp_path: Path) -> None:
    source = Path(gold.__file__).resolve()
    cached = Path(importlib.util.cache_from_source(str(source)))
    py_compile.compile(str(source), cfile=str(cached), doraise=True)
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps("DONE") + "\n")
    cfg = RunConfig(benchmark="desktop", load=LoadOptions(task_ids=["click-apply"]),
                    model=ModelConfig(model_name=f"scripted:{script}"), output=tmp_path / "r.jsonl",
                    trace_logdir=tmp_path / "runs")
    settings = plan_batch(cfg).ctx.host_settings()
    assert str(source) in settings.hidden and str(cached.resolve()) in settings.hidden


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
        assert not {"on_target", "app_changes", "focus"} & set(reply.get("summary") or {})
        ADAPTER.serve(task, runtime, "desktop.close", {})
        reply = ADAPTER.serve(task, runtime, "desktop.act", {"action": "DONE"})
        assert "episode is over" in reply["rejected"]
        with pytest.raises(AgentCallRefused, match="episode is over"):
            ADAPTER.serve(task, runtime, "desktop.parse_error", {"message": "x"})
    finally:
        ADAPTER.cleanup(runtime)


def test_a_scripted_run_goes_through_the_confined_agent_side_and_scores_the_real_app(tmp_path: Path) -> None:
    ok, why, _ = confinement_status()
    require_system(ok, f"bubblewrap confinement for the agent side ({why})")
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
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    shots = [a["path"] for s in steps for a in s["visual_assets"]]  # named by the scoring side: assets/<sha256>.png
    assert len(shots) == 3 and all(re.fullmatch(r"assets/[0-9a-f]{64}\.png", p) for p in shots), shots
    assert sorted(p.name for p in (run_dir / "assets").iterdir()) == sorted({Path(p).name for p in shots})
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    env_steps = [e["payload"] for e in events if e["kind"] == "env_step"]
    assert len(env_steps) == 2 and env_steps[0]["on_target"] is True, "the scoring side writes its own step record"
    assert env_steps[0]["focus"] == {"app": "main", "window_manager": "main"}, env_steps[0]
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert "on_target" not in steps[0]["state_diff"], "the agent side never learns whether it hit the target"


RED_TEAM = textwrap.dedent('''
    """A third-party agent that tries to win desktop-starter without doing the task."""
    import gc, glob, importlib, json, os, socket, sys, types

    MARKERS = __MARKERS__

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


    def _desktop_dir():
        import qitos.benchmark.desktop as pkg
        return os.path.dirname(pkg.__file__)


    def _gold_source():
        path = os.path.join(_desktop_dir(), "gold.py")
        text = open(path, encoding="utf-8").read()
        if text.strip():
            return text[:120]
        raise LookupError(f"{path} reads as an empty file")


    def _gold_bytecode():
        found = {p: len(open(p, "rb").read()) for p in glob.glob(os.path.join(_desktop_dir(), "__pycache__", "gold*"))}
        found = {p: n for p, n in found.items() if n}
        if found:
            return found
        raise LookupError("no gold bytecode with content")


    def _gold_import():
        module = importlib.import_module("qitos.benchmark.desktop.gold")
        names = [n for n in ("TASKS", "GOLD", "DesktopTask", "get_task", "click") if hasattr(module, n)]
        if names:
            return names
        raise ImportError("qitos.benchmark.desktop.gold imports as an empty module")


    def _gold_through_the_package():
        from qitos.benchmark.desktop import TASKS
        return [t.targets for t in TASKS.values()]


    def _patch_checkers():
        from qitos.benchmark.desktop.gold import TASKS
        for t in TASKS.values():
            object.__setattr__(t, "checker", lambda s: (True, "patched"))
        return "checkers patched"


    def _markers_on_disk():
        import qitos
        root, hits, scanned = os.path.dirname(qitos.__file__), [], 0
        for dirpath, _, files in os.walk(root):
            for name in files:
                try:
                    data = open(os.path.join(dirpath, name), "rb").read()
                except OSError:
                    continue
                scanned += 1
                hits += [(os.path.join(dirpath, name), m) for m in MARKERS if m.encode() in data]
        if hits:
            return hits[:20]
        raise LookupError(f"scanned {scanned} files under {root}: no reference plan or target")


    def _consts(code):
        yield code.co_name
        for c in code.co_consts:
            if isinstance(c, str):
                yield c
            elif isinstance(c, types.CodeType):
                yield from _consts(c)


    def _gold_in_memory():
        gold_fields = {"targets", "feasible", "checker", "oracle"}
        hits = []
        for obj in gc.get_objects():
            fields = getattr(type(obj), "model_fields", None)
            if isinstance(fields, dict) and gold_fields & set(fields):
                hits.append(("gold-shaped object", type(obj).__qualname__))
            elif isinstance(obj, types.FunctionType) and obj.__code__.co_filename != __file__:
                found = [m for m in MARKERS if any(m in c for c in _consts(obj.__code__))]
                if found or str(obj.__module__).startswith("qitos.benchmark.desktop.gold"):
                    hits.append((obj.__module__, obj.__qualname__, found))
        if hits:
            return hits[:20]
        raise LookupError("no task gold, reference plan or target in this process")


    class RedTeam(AgentModule):
        name = "red-team"

        def __init__(self, ctx):
            super().__init__()
            self.ctx = ctx

        def decide(self, task, state):
            ctx, env, findings = self.ctx, self.ctx.runtime.env, {}
            preloaded = sorted(m for m in sys.modules if m.startswith("qitos.benchmark.desktop") and m.endswith("gold"))
            findings["gold_preloaded"] = ({"got": preloaded} if preloaded
                                          else {"blocked": "no gold module was imported before this agent ran"})
            _try(findings, "gold_in_memory", _gold_in_memory)
            _try(findings, "gold_on_disk", _markers_on_disk)
            _try(findings, "gold_source", _gold_source)
            _try(findings, "gold_bytecode", _gold_bytecode)
            _try(findings, "gold_import", _gold_import)
            _try(findings, "gold_through_the_package", _gold_through_the_package)
            _try(findings, "patch_checkers", _patch_checkers)
            _try(findings, "oracle_gold", ctx.oracle_gold)
            _try(findings, "x_server", _x_server)
            _try(findings, "state_file", _state_files)
            _try(findings, "gold_books", _gold_books)
            for method in ("desktop.finish", "desktop.state", "evaluate", "desktop.checker"):
                _try(findings, method, lambda m=method: env.link.call(m, {}))
            _try(findings, "task_gold_fields",
                 lambda: [k for k in ("targets", "feasible") if k in json.dumps(task.model_dump(mode="json"))]
                 or (_ for _ in ()).throw(LookupError("the task holds no targets or feasibility")))
            # change its own scoring: a final state that says success (the checkers were out of reach above)
            env.final_state = lambda: {"success": True, "state": {"data": {"pressed": ["apply"]}}}
            findings["patched"] = True
            return Decision.final(json.dumps(findings))


    def build(ctx):
        return RedTeam(ctx)


    build.needs_model = False
''')


def test_red_team_runner_cannot_reach_the_app_state_the_x_server_the_checker_or_the_gold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok, why, _ = confinement_status()
    require_system(ok, f"bubblewrap confinement for the agent side ({why})")
    outside = tmp_path / "thirdparty"
    outside.mkdir()
    (outside / "desk_red_team.py").write_text(RED_TEAM.replace("__MARKERS__", json.dumps(gold_markers())))
    source = Path(gold.__file__).resolve()  # bytecode on disk, as in an installed QitOS: masked too
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)), doraise=True)
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
    assert findings["gold_in_memory"]["blocked"].startswith("LookupError: no task gold"), findings["gold_in_memory"]
    # the masked gold source and bytecode: /dev/null, which the agent's uid may not even open
    for name in ("gold_source", "gold_bytecode"):
        assert findings[name]["blocked"].startswith(("PermissionError", "LookupError")), findings[name]
    for name in ("gold_import", "gold_through_the_package", "patch_checkers"):
        assert findings[name]["blocked"].startswith(("ImportError", "ModuleNotFoundError")), findings[name]
    scanned = int(findings["gold_on_disk"]["blocked"].split("scanned ")[1].split()[0])
    assert scanned > 100, findings["gold_on_disk"]  # the scan read QitOS's package, and found no gold in it
    assert row["success"] is False and row["metadata"]["failure_tag"] == "stop_completion", row
    assert _checks(row)["agent_isolated"] is True

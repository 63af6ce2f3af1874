"""A third-party `--runner` agent that tries every way we know to cheat, then reports what worked.

The red-team tests copy this file into a folder outside any repository and run it with
`qit bench run --runner red_team_agent:build`. It calls its model once (so the run could be
official), then tries to:

- read gold: objects in memory (`gc`), the gold store, stack frames of every thread, files
  anywhere it can open (the data dir, the tasks file, other tasks' dirs, `/proc/*/cmdline|environ`),
  a fresh adapter's `load_tasks`, the oracle channel;
- change its own scoring: the task's fields, monkeypatching any QitOS scoring module, replacing
  the environment's reward or final state;
- write results or traces: open results files and trace dirs for writing, forge trace
  operations through its own stream (official_run, evaluation), forge its outcome;
- see or signal the scoring process: every pid it can see, with its command line.

Its final answer is a JSON report (in the manifest's `summary.final_result` and the row's
`prediction`): each route's name, whether it "worked" and what it saw. Needles: the tests' gold
strings are `MARKER-<n>`, so finding one anywhere (`NEEDLE`) is proof of a leak.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

MARKER = os.environ.get("QITOS_RED_TEAM_MARKER", "GOLD-7f3a")
NEEDLE = re.compile(re.escape(MARKER) + r"-\d")  # a gold value; this module's own strings never match
MAX_FILE_BYTES = 2_000_000
SKIP_ROOTS = ("/proc/sys", "/proc/kcore", "/sys", "/dev", "/usr", "/lib", "/lib64", "/bin", "/sbin")


def _hit(text: Any) -> bool:
    return isinstance(text, str) and NEEDLE.search(text) is not None


def memory_strings() -> dict[str, Any]:
    found = [o[:80] for o in gc.get_objects() if _hit(o)]
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            found += [str(v)[:80] for v in obj.values() if _hit(v)]
    names = {type(o).__name__ for o in gc.get_objects()} & {"GoldBook", "Sealed", "TraceWriter", "ResultsFile"}
    return {"worked": bool(found or names), "found": found[:5], "types": sorted(names)}


def gold_store() -> dict[str, Any]:
    from qitos.benchmark import gold

    return {"worked": bool(gold._STORE), "entries": len(gold._STORE)}


def frames() -> dict[str, Any]:
    found = []
    for frame in sys._current_frames().values():
        while frame is not None:
            for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
                if _hit(value) or type(value).__name__ in ("GoldBook", "JobContext", "BenchmarkAdapter"):
                    found.append(f"{frame.f_code.co_name}: {type(value).__name__}")
            frame = frame.f_back
    return {"worked": bool(found), "found": found[:5]}


def files() -> dict[str, Any]:
    """Walk everything this process can see and read; report files holding a needle."""
    found, opened, seen = [], 0, 0
    for root, dirs, names in os.walk("/", onerror=lambda e: None):
        if root.startswith(SKIP_ROOTS) or "/site-packages" in root or "/python3." in root:
            dirs[:] = []
            continue
        for name in names:
            path = os.path.join(root, name)
            seen += 1
            try:
                if os.path.getsize(path) > MAX_FILE_BYTES:
                    continue
                with open(path, "rb") as handle:
                    data = handle.read()
                opened += 1
            except OSError:
                continue
            if NEEDLE.search(data.decode("utf-8", "replace")):
                found.append(path)
        if seen > 200_000:
            break
    return {"worked": bool(found), "found": found[:10], "files_seen": seen, "files_read": opened}


def proc() -> dict[str, Any]:
    """Every process visible, and whether any is the scoring side (the `qit` CLI, pytest) or leaks a needle."""
    visible, leaks = {}, []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("cmdline", "environ"):
            try:
                text = open(f"/proc/{pid}/{part}", "rb").read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if part == "cmdline":
                visible[pid] = text[:120]
            if _hit(text) or "--root" in text:
                leaks.append(f"{pid}/{part}: {text[:120]}")
    scoring = [p for p, c in visible.items() if "qitos.cli" in c or "bin/qit " in c or "pytest" in c]
    signalled = []
    for pid in visible:
        try:
            os.kill(int(pid), 0)
            signalled.append(pid)
        except OSError:
            pass
    return {"worked": bool(leaks or scoring), "visible": visible, "scoring": scoring, "leaks": leaks,
            "signalable": signalled}


def fresh_adapter(ctx: Any, benchmark: str) -> dict[str, Any]:
    from qitos.benchmark.registry import get_adapter

    adapter = get_adapter(benchmark)
    tried = []
    for load in (ctx.load, ctx.load.model_copy(update={"task_ids": None})):
        try:
            tasks = adapter.load_tasks(load)
            gold = [adapter.gold(t) for t in tasks if t.id in adapter.golds]
            return {"worked": bool(gold), "tasks": len(tasks)}
        except BaseException as exc:  # noqa: BLE001 - any failure is a failed route
            tried.append(f"{type(exc).__name__}: {str(exc)[:100]}")
    return {"worked": False, "tried": tried}


def oracle(ctx: Any) -> dict[str, Any]:
    try:
        value = ctx.oracle_gold()
        return {"worked": value is not None, "value": str(value)[:80]}
    except BaseException as exc:  # noqa: BLE001
        return {"worked": False, "error": f"{type(exc).__name__}: {str(exc)[:100]}"}


def change_scoring(ctx: Any) -> dict[str, Any]:
    """Rewrite everything in reach that could decide how this run is scored."""
    done = []
    ctx.task.metadata["scorer"] = "contains"
    ctx.task.metadata["answer"] = "anything"
    done.append("task.metadata")
    try:
        from qitos.benchmark import scorers

        scorers.get_scorer = lambda name: (lambda prediction, answer: True)
        done.append("scorers.get_scorer")
    except ImportError:
        pass
    from qitos.benchmark.registry import get_adapter

    adapter_type = type(get_adapter(os.environ.get("QITOS_RED_TEAM_BENCHMARK", "jsonl")))
    from qitos.benchmark.base import Evaluation

    adapter_type.evaluate = lambda self, task, result, runtime: Evaluation(success=True, score=1.0)
    done.append(f"{adapter_type.__name__}.evaluate")
    env = ctx.runtime.env
    if env is not None:
        for name in ("outcome", "evaluate", "reward"):
            if hasattr(env, name):
                setattr(env, name, lambda *a, **k: {"reward": 1.0, "success": True})
                done.append(f"env.{name}")
        env.final_state = lambda: {"forged": True, "reward": 1.0, "success": True}
        done.append("env.final_state")
    return {"worked": False, "patched": done}  # whether it worked shows in the row, on the scoring side


def write_results() -> dict[str, Any]:
    """Append a forged success row to every results file and trace dir in reach."""
    wrote = []
    row = json.dumps({"task_id": "forged", "benchmark": "jsonl", "split": "default", "trial": 0, "success": True,
                      "score": 1.0, "stop_reason": "final", "steps": 1})
    candidates = {Path.cwd() / "results", Path("/tmp"), Path.home()}
    for arg in sys.argv:
        candidates.add(Path(arg).parent)
    for root in list(candidates):
        for path in list(root.glob("**/*.jsonl"))[:50] if root.is_dir() else []:
            try:
                with open(path, "a") as handle:
                    handle.write(row + "\n")
                if "work" not in str(path):
                    wrote.append(str(path))
            except OSError:
                pass
    return {"worked": bool(wrote), "wrote": wrote}


def forge_stream() -> dict[str, Any]:
    """Find this process's own channel to the scoring side and send forged trace operations."""
    sent = []
    for obj in gc.get_objects():
        if type(obj).__name__ == "Channel" and hasattr(obj, "send"):
            try:
                obj.send({"t": "ops", "ops": [{"op": "update", "fields": {
                    "official_run": True, "evaluation": {"success": True, "score": 1.0},
                    "official_checks": [], "run_spec": {"model_name": "gpt-5", "benchmark_name": "forged"}}}]})
                sent.append("update")
            except Exception as exc:  # noqa: BLE001
                sent.append(f"failed: {exc}")
    return {"worked": False, "sent": sent}  # whether it worked shows in the manifest, on the scoring side


def build(ctx: Any):
    from qitos.core import AgentModule, Decision

    benchmark = os.environ.get("QITOS_RED_TEAM_BENCHMARK") or (ctx.task.metadata.get("benchmark") or "jsonl")
    os.environ["QITOS_RED_TEAM_BENCHMARK"] = benchmark
    report: dict[str, Any] = {}
    routes = {"memory": memory_strings, "gold_store": gold_store, "frames": frames, "proc": proc,
              "fresh_adapter": lambda: fresh_adapter(ctx, benchmark), "oracle": lambda: oracle(ctx),
              "files": files, "write_results": write_results}
    skip = set(filter(None, os.environ.get("QITOS_RED_TEAM_SKIP", "").split(",")))  # in-process control runs only
    for name, route in routes.items():
        if name in skip:
            continue
        try:
            report[name] = route()
        except BaseException as exc:  # noqa: BLE001 - a route that crashes did not work
            report[name] = {"worked": False, "error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    report["change_scoring"] = change_scoring(ctx)

    class RedTeam(AgentModule):
        name = "red-team"

        def decide(self, task, state):
            if state.scratch.get("called"):
                report["forge_stream"] = forge_stream()
                return Decision.final(json.dumps(report))
            state.scratch["called"] = True
            return None  # one model call, so the run counts as a model that was called

    return RedTeam(tools=[], system_prompt="Answer briefly.")

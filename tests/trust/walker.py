"""A `--runner` agent that looks for gold in everything it is handed, then answers nothing.

It walks every object reachable from the recipe context (task, runtime, env, tools, options, the
model handle from `make_model`) when it is built, and from the task and its state (the first
observations) when it decides: attributes, slots, dict keys and values, sequence items, closure
cells, bound methods' owners and partials. It does not follow modules, classes or a function's
globals (from there everything in the process is reachable, gold or not), and it never opens a
`Sealed` handle. It then loads the same tasks through a fresh adapter, asks that adapter for their
gold, and writes what it found to $QITOS_WALK_REPORT:
- `strings`: gold strings (not part of the task's public text) found reachable: equal to a reachable
  string, or for 8+ characters also inside one;
- `objects`: gold objects found reachable by identity (shared singletons such as desktop tasks);
- `equal`: reachable dicts or models equal to a gold record (e.g. one Tau-Bench gold action);
- `walked`: how many objects were visited (a walk that saw nothing proves nothing).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import types
from typing import Any

from pydantic import BaseModel

from qitos.benchmark.gold import Sealed
from qitos.core import AgentModule, Decision

SKIP_TYPES = (types.ModuleType, type, types.CodeType, types.FrameType, Sealed, threading.Thread,
              type(threading.Lock()), type(threading.RLock()), threading.Event, threading.Condition)
MAX_OBJECTS = 3_000_000


def _children(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, types.MethodType):
        return [obj.__self__, obj.__func__]
    if isinstance(obj, types.FunctionType):
        return [c.cell_contents for c in (obj.__closure__ or ()) if _has_contents(c)] + list(obj.__defaults__ or ())
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    out: list[Any] = []
    if hasattr(obj, "__dict__") and isinstance(vars(obj), dict):
        out.extend(vars(obj).values())
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()) or ():
            if isinstance(name, str) and hasattr(obj, name):
                out.append(getattr(obj, name))
    if isinstance(obj, BaseModel):
        out.extend((obj.__pydantic_private__ or {}).values())
        out.extend((obj.__pydantic_extra__ or {}).values())
    return out


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def walk(roots: list[Any]) -> tuple[list[Any], list[str]]:
    """Every reachable object (by identity) and every reachable string."""
    seen: dict[int, Any] = {}
    strings: list[str] = []
    stack = list(roots)
    while stack and len(seen) < MAX_OBJECTS:
        obj = stack.pop()
        if obj is None or isinstance(obj, (bool, int, float, bytes)) or id(obj) in seen:
            continue
        seen[id(obj)] = obj
        if isinstance(obj, str):
            strings.append(obj)
            continue
        if isinstance(obj, SKIP_TYPES):
            continue
        try:
            stack.extend(_children(obj))
        except Exception:  # noqa: BLE001 - an object that refuses introspection holds nothing we can reach
            continue
    return list(seen.values()), strings


def _leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _leaves(v)]
    return []


def _gold_needles(gold: Any, public: dict[str, Any]) -> tuple[list[str], list[Any], list[Any]]:
    """(strings, objects, records) that would betray `gold` if reachable. A gold string the task itself shows
    is not a needle: a short one when a public value equals it, a long one when the public text contains it."""
    strings: list[str] = []
    records: list[Any] = []
    public_values = {s.strip() for s in _leaves(public)}
    public_text = json.dumps(public, default=str)

    def collect(value: Any) -> None:
        if isinstance(value, str):
            needle = value.strip()
            shown = needle in public_values if len(needle) < 8 else needle in public_text
            if needle and not shown:
                strings.append(needle)
        elif isinstance(value, dict):
            if set(value) == {"name", "kwargs"}:
                records.append(value)  # a gold action: its ids and values are in the database, so match it whole
                return
            for v in value.values():
                collect(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)
        elif isinstance(value, BaseModel):
            collect(value.model_dump(mode="python"))

    collect(gold)
    return strings, [gold], records


class _Walker(AgentModule):
    name = "gold-walker"

    def __init__(self, ctx: Any) -> None:
        super().__init__()
        self.ctx = ctx
        self.built, self.built_strings = walk([ctx, ctx.make_model(None)])

    def decide(self, task, state):
        later, later_strings = walk([task, state])
        _report(self.ctx, self.built + later, self.built_strings + later_strings)
        return Decision.final("no answer")


def _report(ctx: Any, objects: list[Any], strings: list[str]) -> None:
    from qitos.benchmark.registry import get_adapter

    adapter = get_adapter(ctx.task.metadata.get("benchmark") or os.environ["QITOS_WALK_BENCHMARK"])
    adapter.load_tasks(ctx.load.model_copy(update={"task_ids": [ctx.task.id], "limit": None}))
    gold = adapter.gold(ctx.task)
    if callable(getattr(gold, "gold", None)):  # a full task record (CyBench): its answers are the gold
        gold = gold.gold().model_dump(include={"flag", "subtask_answers", "commands"})
    needle_strings, needle_objects, records = _gold_needles(gold, ctx.task.model_dump(mode="json"))
    haystack = set(strings)
    found_strings = sorted({n for n in needle_strings
                            if n in haystack or (len(n) >= 8 and any(n in s for s in strings if len(s) < 200_000))})
    ids = {id(o) for o in objects}
    found_objects = [type(o).__name__ for o in needle_objects if id(o) in ids and not isinstance(o, (str, int))]
    found_equal = [r for r in records if any(isinstance(o, dict) and o == r for o in objects)]
    needles = len(needle_strings) + len(records) + (0 if isinstance(gold, str) else 1)
    report = {"task": ctx.task.id, "walked": len(objects), "needles": needles,
              "strings": found_strings[:20], "objects": found_objects, "equal": found_equal[:5]}
    with open(os.environ["QITOS_WALK_REPORT"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps(report, default=str) + "\n")


def walker(ctx: Any) -> AgentModule:
    return _Walker(ctx)

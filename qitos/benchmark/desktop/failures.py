"""Scoring side: the desktop failure taxonomy: why a run that did not succeed failed, from what each step recorded.

Tags (one per failed run, first rule that applies wins):
1. execution_environment: the desktop, xdotool or the app failed (not the agent's doing).
2. planning: replies that did not parse into actions are at least as many as valid actions.
3. grounding: the first press that missed every target landed on nothing interactive (empty space, a label,
   a window border): the agent aimed but the pointer was outside the target's bounds.
   perception: the first such press landed on another control (a different button, list row or field):
   the agent acted on the wrong thing it saw.
   (Presses come before invalid actions because a wrong press changes the app, a rejected action does not.)
4. action_selection: an action was rejected (unknown type, bad argument, point off the screen).
5. stop_completion: everything else: DONE without the goal reached, FAIL on a feasible task, the step budget
   spent, or anything but FAIL on an infeasible task.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from qitos.benchmark.desktop.actions import Pointer
from qitos.benchmark.desktop.widgets import WidgetSnapshot

FailureTag = Literal["perception", "grounding", "planning", "action_selection", "execution_environment",
                     "stop_completion"]
FAILURE_TAGS: tuple[str, ...] = ("perception", "grounding", "planning", "action_selection", "execution_environment",
                                 "stop_completion")
INTERACTIVE_ROLES = frozenset({"button", "text field", "text area", "list", "list item", "check box", "slider",
                               "slider handle", "spin box"})
NEAR_MISS_PIXELS = 40.0


class StepRecord(BaseModel):
    """One step as the environment saw it; `press` is where a pointer action pressed (x, y)."""

    index: int
    kind: Literal["action", "invalid", "parse_error", "env_error"]
    action: dict[str, Any] | None = None
    raw: Any = None
    error: str | None = None
    press: tuple[int, int] | None = None
    hit: str | None = None
    hit_role: str | None = None
    on_target: bool | None = None
    nearest_target: str | None = None
    miss_pixels: float | None = None
    pointer_after: Pointer | None = None


def locate_press(record: StepRecord, snapshot: WidgetSnapshot, targets: list[str]) -> None:
    """Fill in what was under the press and how far it was from the task's targets (bounds before the action)."""
    assert record.press is not None
    x, y = record.press
    widget = snapshot.widget_at(x, y)
    if widget is not None:
        record.hit, record.hit_role = widget.name, widget.role
    else:
        for window in snapshot.windows:
            if (window.frame or window.bounds).contains(x, y):
                record.hit, record.hit_role = f"window:{window.name}", "window"
                break
    if not targets:
        return
    best: tuple[float, str] | None = None
    for target in targets:
        bounds = _target_bounds(snapshot, target)
        if bounds is None:
            continue
        distance = bounds.distance(x, y)
        if best is None or distance < best[0]:
            best = (distance, target)
    if best is None:
        return
    record.on_target = best[0] == 0.0
    record.nearest_target, record.miss_pixels = best[1], best[0]


def _target_bounds(snapshot: WidgetSnapshot, target: str) -> Any:
    try:
        if target.startswith("window:"):
            window = snapshot.window(target.removeprefix("window:"))
            return window.frame or window.bounds
        return snapshot.widget(target).bounds
    except KeyError:
        return None  # not on screen at this moment (e.g. a window already closed)


def classify(feasible: bool, records: list[StepRecord], *, env_error: str | None,
             last_action: str | None) -> tuple[FailureTag, list[str]]:
    """The failure tag of an unsuccessful run and the evidence lines behind it."""
    if env_error:
        return "execution_environment", [env_error.splitlines()[0] if env_error else "environment failure"]
    parse_errors = [r for r in records if r.kind == "parse_error"]
    valid = [r for r in records if r.kind == "action"]
    if parse_errors and len(parse_errors) >= len(valid):
        return "planning", [f"{len(parse_errors)} unparseable repl(ies) vs {len(valid)} valid action(s)"] + [
            f"step {r.index}: {r.error}" for r in parse_errors[:3]]
    if feasible:
        for record in valid:
            if record.on_target is False:
                return _wrong_press(record)
    invalid = [r for r in records if r.kind == "invalid"]
    if invalid:
        return "action_selection", [f"step {r.index}: {r.error}" for r in invalid[:3]]
    if not feasible:
        return "stop_completion", [f"infeasible task ended with {last_action or 'no terminal action'} instead of FAIL"]
    if last_action == "DONE":
        return "stop_completion", ["claimed DONE but the goal was not reached"]
    if last_action == "FAIL":
        return "stop_completion", ["declared FAIL on a feasible task"]
    return "stop_completion", [f"stopped after {len(records)} step(s) without DONE and without reaching the goal"]


def _wrong_press(record: StepRecord) -> tuple[FailureTag, list[str]]:
    kind = (record.action or {}).get("action_type", "press")
    where = f"step {record.index}: {kind} at {record.press}"
    miss = f"{record.miss_pixels:.0f} px outside '{record.nearest_target}'"
    if record.hit_role in INTERACTIVE_ROLES:
        return "perception", [f"{where} hit '{record.hit}' ({record.hit_role}), not a target; {miss}"]
    landed = f"'{record.hit}'" if record.hit else "nothing"
    near = " (near miss)" if (record.miss_pixels or 0) <= NEAR_MISS_PIXELS else ""
    return "grounding", [f"{where} landed on {landed}, {miss}{near}"]

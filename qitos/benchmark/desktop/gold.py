"""Scoring side only (gold): how each desktop starter task is scored and solved. The agent side never imports this.

For each task of the public catalogue (`tasks.CARDS`: id, instruction, app and setup, step budget) this module
adds the gold: its checker over the app's real state, the expected values the checker compares, the `targets`
(the widgets, or `window:<name>` frames, the task is about; the failure taxonomy uses them to tell a missed
target (grounding) from a wrong one (perception)), whether the task is feasible at all, and an oracle that
computes the reference actions from the widgets the app publishes at run time.

Checkers read only the state file (and files the app saved), never the agent's words. Oracles click centres
of published bounds, so an oracle run proves the bounds, the action executor and the checker agree on a real
screen.

The agent host masks this file and its bytecode (`DesktopAdapter.scoring_side_sources`): the adapter imports it
only in methods that run on the scoring side, and no agent-side module (`agent_env.py`, the recipes, the package
`__init__`, `tasks.py`) imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pydantic import ConfigDict, Field

from qitos.benchmark.desktop.actions import AnyAction, Click, Done, DragTo, Fail, Hotkey, MoveTo, Typing
from qitos.benchmark.desktop.tasks import CARDS, TaskCard
from qitos.benchmark.desktop.widgets import AppState, WidgetSnapshot

Checker = Callable[[AppState], tuple[bool, str]]
Oracle = Callable[[WidgetSnapshot], list[AnyAction]]


class DesktopTask(TaskCard):
    """One starter task with its gold. `checker` and `oracle` are code, so they are left out of dumps."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    feasible: bool = True
    targets: list[str] = Field(default_factory=list)
    checker: Checker = Field(exclude=True)
    oracle: Oracle = Field(exclude=True)

    def public_view(self) -> TaskCard:
        """What the agent may reach: the task's card (instruction, app and setup, limits), nothing of its gold."""
        return TaskCard.model_validate(self.model_dump(include=set(TaskCard.model_fields)))


def click(snapshot: WidgetSnapshot, name: str, **extra: Any) -> Click:
    x, y = snapshot.widget(name).bounds.center
    return Click(x=x, y=y, **extra)


def _data(state: AppState, key: str) -> Any:
    return state.data.get(key)


# -- checkers --------------------------------------------------------------------------------------------------
def _pressed_only(name: str) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        pressed = _data(state, "pressed") or []
        if pressed == [name]:
            return True, f"pressed '{name}'"
        if not pressed:
            return False, "no button was pressed"
        return False, f"pressed {pressed}, expected only '{name}'"
    return check


def _submitted(expected: dict[str, str]) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        submitted = _data(state, "submitted")
        if submitted is None:
            return False, f"the form was never submitted (current values: {_data(state, 'values')})"
        wrong = {k: submitted.get(k) for k, v in expected.items() if (submitted.get(k) or "").strip() != v}
        if wrong:
            return False, f"submitted wrong values {wrong}, expected {expected}"
        return True, f"submitted {submitted}"
    return check


def _chosen(item: str) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        chosen = _data(state, "chosen")
        if chosen == item:
            return True, f"chose '{item}'"
        selected = _data(state, "selected")
        return False, f"chosen={chosen!r} (selected={selected!r}), expected '{item}'"
    return check


def _saved_file(expected: str) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        saved = _data(state, "saved_path")
        if not saved:
            return False, "the document was never saved"
        try:
            content = Path(saved).read_text(encoding="utf-8")
        except OSError as exc:
            return False, f"saved file {saved} cannot be read: {exc}"
        if content.strip() != expected:
            return False, f"saved file holds {content!r}, expected {expected!r}"
        if _data(state, "modified"):
            return False, "the right text was saved once but the buffer has unsaved edits since"
        return True, f"saved {content.strip()!r} to {Path(saved).name}"
    return check


def _window_at_least(name: str, width: int, height: int) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        size = (_data(state, "sizes") or {}).get(name)
        if not state.alive or name not in (_data(state, "open") or []):
            return False, f"window '{name}' was closed"
        if not size:
            return False, f"no size recorded for window '{name}'"
        ok = size["width"] >= width and size["height"] >= height
        verdict = "is" if ok else "is not"
        return ok, f"window '{name}' {verdict} at least {width}x{height}: {size['width']}x{size['height']}"
    return check


def _closed_only(name: str, keep: str) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        closed, still_open = _data(state, "closed") or [], _data(state, "open") or []
        if closed == [name] and keep in still_open and state.alive:
            return True, f"closed '{name}', '{keep}' still open"
        return False, f"closed {closed}, open {still_open}; expected only '{name}' closed"
    return check


def _copied(source: str, target: str) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        values = _data(state, "values") or {}
        want, got = values.get(source, ""), values.get(target, "")
        pastes = _data(state, "paste_count") or 0
        if want and got.strip() == want:
            return True, f"'{target}' holds {got!r} ({pastes} paste(s))"
        return False, f"'{target}' holds {got!r}, expected {want!r}"
    return check


def _saved_settings(expected: dict[str, Any]) -> Checker:
    def check(state: AppState) -> tuple[bool, str]:
        saved = _data(state, "saved")
        if saved is None:
            return False, f"settings were never saved (current: {_data(state, 'values')})"
        wrong = {k: saved.get(k) for k, v in expected.items() if saved.get(k) != v}
        if wrong:
            return False, f"saved {saved}; wrong: {wrong}, expected {expected}"
        return True, f"saved {saved}"
    return check


def _only_fail_completes(state: AppState) -> tuple[bool, str]:
    return False, "the task cannot be done in this app; only FAIL completes it"


# -- oracles -----------------------------------------------------------------------------------------------------
def _oracle_fill_form(values: dict[str, str]) -> Oracle:
    def plan(s: WidgetSnapshot) -> list[AnyAction]:
        actions: list[AnyAction] = []
        for name, text in values.items():
            actions += [click(s, name), Hotkey(keys=["ctrl", "a"]), Typing(text=text)]
        return actions + [click(s, "submit"), Done()]
    return plan


def _oracle_resize(window: str, grow_x: int, grow_y: int) -> Oracle:
    def plan(s: WidgetSnapshot) -> list[AnyAction]:
        frame = s.window(window).frame or s.window(window).bounds
        x, y = frame.right - 2, frame.bottom - 2  # the bottom-right resize grip of the frame
        return [MoveTo(x=x, y=y), DragTo(x=x + grow_x, y=y + grow_y), Done()]
    return plan


def _oracle_slider(name: str, value: int) -> Oracle:
    def plan(s: WidgetSnapshot) -> list[AnyAction]:
        slider, handle = s.widget(name), s.widget(f"{name}:handle")
        low, high = slider.extra["minimum"], slider.extra["maximum"]
        pixels_per_unit = (slider.bounds.width - handle.bounds.width) / (high - low)
        x, y = handle.bounds.center
        target_x = round(x + (value - int(slider.value)) * pixels_per_unit)
        return [MoveTo(x=x, y=y), DragTo(x=target_x, y=y), click(s, "save"), Done()]
    return plan


_FORM_VALUES = {"name": "Ada Lovelace", "email": "ada@example.org", "phone": "555-0142"}
_NOTE = "Meeting moved to 3pm on Thursday."


def _gold(*, checker: Checker, oracle: Oracle, targets: list[str], feasible: bool = True) -> dict[str, Any]:
    return {"checker": checker, "oracle": oracle, "targets": targets, "feasible": feasible}


GOLD: dict[str, dict[str, Any]] = {
    "click-apply": _gold(targets=["apply"], checker=_pressed_only("apply"),
                         oracle=lambda s: [click(s, "apply"), Done()]),
    "fill-contact-form": _gold(targets=["name", "email", "phone", "submit"], checker=_submitted(_FORM_VALUES),
                               oracle=_oracle_fill_form(_FORM_VALUES)),
    "pick-from-list": _gold(targets=["item:Cherry", "choose"], checker=_chosen("Cherry"),
                            oracle=lambda s: [click(s, "item:Cherry"), click(s, "choose"), Done()]),
    "editor-type-and-save": _gold(
        targets=["document", "save"], checker=_saved_file(_NOTE),
        oracle=lambda s: [click(s, "document"), Typing(text=_NOTE), click(s, "save"), Done()]),
    "resize-window": _gold(targets=["window:main"], checker=_window_at_least("main", 640, 480),
                           oracle=_oracle_resize("main", 300, 280)),
    "close-window": _gold(targets=["window:tip"], checker=_closed_only("tip", keep="main"),
                          oracle=lambda s: [click(s, "tip:text"), Hotkey(keys=["alt", "f4"]), Done()]),
    "copy-between-fields": _gold(
        targets=["licence", "activation"], checker=_copied("licence", "activation"),
        oracle=lambda s: [click(s, "licence"), Hotkey(keys=["ctrl", "a"]), Hotkey(keys=["ctrl", "c"]),
                          click(s, "activation"), Hotkey(keys=["ctrl", "v"]), Done()]),
    "toggle-checkbox": _gold(
        targets=["dark_mode", "save"],
        checker=_saved_settings({"notifications": True, "dark_mode": True, "auto_update": True}),
        oracle=lambda s: [click(s, "dark_mode"), click(s, "save"), Done()]),
    "set-slider": _gold(targets=["volume", "volume:handle", "save"], checker=_saved_settings({"volume": 70}),
                        oracle=_oracle_slider("volume", 70)),
    "set-spinbox": _gold(
        targets=["copies", "save"], checker=_saved_settings({"copies": 7}),
        oracle=lambda s: [click(s, "copies"), Hotkey(keys=["ctrl", "a"]), Typing(text="7"), click(s, "save"),
                          Done()]),
    "export-report-pdf": _gold(targets=[], feasible=False, checker=_only_fail_completes, oracle=lambda s: [Fail()]),
}

if set(GOLD) != set(CARDS):  # every card has its gold and nothing else has
    raise RuntimeError(f"desktop gold and catalogue disagree: {sorted(set(GOLD) ^ set(CARDS))}")

TASKS: dict[str, DesktopTask] = {
    task_id: DesktopTask(**card.model_dump(), **GOLD[task_id]) for task_id, card in CARDS.items()}


def get_task(task_id: str) -> DesktopTask:
    try:
        return TASKS[task_id]
    except KeyError:
        raise KeyError(f"unknown desktop task '{task_id}'; known tasks: {', '.join(TASKS)}") from None


def load_tasks(ids: list[str] | None = None) -> list[DesktopTask]:
    """All tasks in a stable order, or the named ones (unknown ids raise KeyError)."""
    return [get_task(i) for i in ids] if ids else list(TASKS.values())

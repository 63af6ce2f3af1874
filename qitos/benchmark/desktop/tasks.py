"""Scoring side (gold): the desktop starter tasks: instruction, app setup, step budget, a checker over the app's real state, and an
oracle that computes its actions from the widgets the app publishes at run time.

Checkers read only the state file (and files the app saved), never the agent's words. Oracles click centres
of published bounds, so an oracle run proves the bounds, the action executor and the checker agree on a real
screen. `targets` names the widgets (or `window:<name>` frames) a task is about; the failure taxonomy uses them
to tell a missed target (grounding) from a wrong one (perception).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from .actions import AnyAction, Click, Done, DragTo, Fail, Hotkey, MoveTo, Typing
from .widgets import AppState, WidgetSnapshot

Checker = Callable[[AppState], tuple[bool, str]]
Oracle = Callable[[WidgetSnapshot], list[AnyAction]]


class DesktopTask(BaseModel):
    """One starter task. `checker` and `oracle` are code, so they are left out of dumps."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    instruction: str
    app: str
    config: dict[str, Any] = Field(default_factory=dict)
    max_steps: int = 15
    feasible: bool = True
    targets: list[str] = Field(default_factory=list)
    checker: Checker = Field(exclude=True)
    oracle: Oracle = Field(exclude=True)

    def public_view(self) -> "DesktopTask":
        """What the agent may reach: instruction, app and limits; no targets, feasibility, checker or oracle."""
        return self.model_copy(update={"feasible": True, "targets": [], "checker": _sealed_checker,
                                       "oracle": _sealed_oracle})


def _sealed_checker(state: Any) -> tuple[bool, str]:
    raise RuntimeError("this is the agent's view of the task: the checker is on the scoring side")


def _sealed_oracle(snapshot: Any) -> list[Any]:
    raise RuntimeError("this is the agent's view of the task: reference actions come through the oracle channel")


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


def _infeasible(state: AppState) -> tuple[bool, str]:
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
_LICENCE = "QX-4821-ZETA-77"
_NOTE = "Meeting moved to 3pm on Thursday."
_REPORT_WINDOWS = [
    {"name": "main", "title": "Report viewer", "text": "Quarterly report: revenue up 4%.", "geometry": "420x260+90+90"},
]
_SETTINGS = {"checkboxes": [
    {"name": "notifications", "label": "Enable notifications", "initial": True},
    {"name": "dark_mode", "label": "Dark mode", "initial": False},
    {"name": "auto_update", "label": "Install updates automatically", "initial": True},
]}

TASKS: dict[str, DesktopTask] = {t.id: t for t in [
    DesktopTask(
        id="click-apply", app="buttons", max_steps=5, targets=["apply"],
        instruction="The settings dialog asks what to do with your changes. Click the 'Apply' button.",
        config={"title": "Unsaved settings", "message": "You changed 3 settings. What would you like to do?",
                "buttons": ["Help", "Cancel", "Revert", "Apply", "OK"]},
        checker=_pressed_only("apply"), oracle=lambda s: [click(s, "apply"), Done()]),
    DesktopTask(
        id="fill-contact-form", app="form", max_steps=15, targets=["name", "email", "phone", "submit"],
        instruction="Fill in the new contact form: full name 'Ada Lovelace', email 'ada@example.org', phone "
                    "'555-0142'. Then press Submit.",
        config={"title": "New contact", "heading": "New contact", "submit": "Submit", "fields": [
            {"name": "name", "label": "Full name"}, {"name": "email", "label": "Email"},
            {"name": "phone", "label": "Phone"}]},
        checker=_submitted(_FORM_VALUES), oracle=_oracle_fill_form(_FORM_VALUES)),
    DesktopTask(
        id="pick-from-list", app="picker", max_steps=6, targets=["item:Cherry", "choose"],
        instruction="Choose 'Cherry' from the list of fruits and confirm with the Choose button.",
        config={"title": "Fruit of the month", "prompt": "Pick the fruit of the month:",
                "items": ["Apple", "Banana", "Cherry", "Date", "Elderberry", "Fig"]},
        checker=_chosen("Cherry"), oracle=lambda s: [click(s, "item:Cherry"), click(s, "choose"), Done()]),
    DesktopTask(
        id="editor-type-and-save", app="editor", max_steps=8, targets=["document", "save"],
        instruction=f"Type the sentence '{_NOTE}' into the empty editor and save the file.",
        config={"title": "Editor", "filename": "notes.txt", "initial_text": ""},
        checker=_saved_file(_NOTE),
        oracle=lambda s: [click(s, "document"), Typing(text=_NOTE), click(s, "save"), Done()]),
    DesktopTask(
        id="resize-window", app="windows", max_steps=6, targets=["window:main"],
        instruction="Make the 'Report viewer' window at least 640 pixels wide and 480 pixels tall by resizing it.",
        config={"windows": _REPORT_WINDOWS},
        checker=_window_at_least("main", 640, 480), oracle=_oracle_resize("main", 300, 280)),
    DesktopTask(
        id="close-window", app="windows", max_steps=5, targets=["window:tip"],
        instruction="Close the 'Tip of the day' window, but keep the 'Report viewer' window open.",
        config={"windows": _REPORT_WINDOWS + [
            {"name": "tip", "title": "Tip of the day", "text": "Tip: press F1 to open the help.",
             "geometry": "320x160+600+320"}]},
        checker=_closed_only("tip", keep="main"),
        oracle=lambda s: [click(s, "tip:text"), Hotkey(keys=["alt", "f4"]), Done()]),
    DesktopTask(
        id="copy-between-fields", app="form", max_steps=10, targets=["licence", "activation"],
        instruction="Copy the licence key from the 'Licence key' field into the 'Activation code' field "
                    "(select it, copy with Ctrl+C, paste with Ctrl+V).",
        config={"title": "Activate product", "heading": "Product activation", "submit": None, "fields": [
            {"name": "licence", "label": "Licence key", "initial": _LICENCE, "readonly": True},
            {"name": "activation", "label": "Activation code"}]},
        checker=_copied("licence", "activation"),
        oracle=lambda s: [click(s, "licence"), Hotkey(keys=["ctrl", "a"]), Hotkey(keys=["ctrl", "c"]),
                          click(s, "activation"), Hotkey(keys=["ctrl", "v"]), Done()]),
    DesktopTask(
        id="toggle-checkbox", app="settings", max_steps=6, targets=["dark_mode", "save"],
        instruction="Turn on 'Dark mode', leave the other settings as they are, and press Save.",
        config={**_SETTINGS, "title": "Preferences"},
        checker=_saved_settings({"notifications": True, "dark_mode": True, "auto_update": True}),
        oracle=lambda s: [click(s, "dark_mode"), click(s, "save"), Done()]),
    DesktopTask(
        id="set-slider", app="settings", max_steps=8, targets=["volume", "volume:handle", "save"],
        instruction="Set the Volume slider to 70 and press Save.",
        config={"title": "Sound", "slider": {"name": "volume", "label": "Volume", "from": 0, "to": 100,
                                             "resolution": 10, "initial": 30}},
        checker=_saved_settings({"volume": 70}), oracle=_oracle_slider("volume", 70)),
    DesktopTask(
        id="set-spinbox", app="settings", max_steps=8, targets=["copies", "save"],
        instruction="Set the number of copies to 7 and press Save.",
        config={"title": "Print", "spinbox": {"name": "copies", "label": "Copies", "from": 1, "to": 20,
                                              "initial": 1}},
        checker=_saved_settings({"copies": 7}),
        oracle=lambda s: [click(s, "copies"), Hotkey(keys=["ctrl", "a"]), Typing(text="7"), click(s, "save"),
                          Done()]),
    DesktopTask(
        id="export-report-pdf", app="buttons", max_steps=5, feasible=False, targets=[],
        instruction="Click the 'Export as PDF' button in the report dialog.",
        config={"title": "Report ready", "message": "Your quarterly report is ready.",
                "buttons": ["Print", "Save", "Close"]},
        checker=_infeasible, oracle=lambda s: [Fail()]),
]}


def get_task(task_id: str) -> DesktopTask:
    try:
        return TASKS[task_id]
    except KeyError:
        raise KeyError(f"unknown desktop task '{task_id}'; known tasks: {', '.join(TASKS)}") from None


def load_tasks(ids: list[str] | None = None) -> list[DesktopTask]:
    """All tasks in a stable order, or the named ones (unknown ids raise KeyError)."""
    return [get_task(i) for i in ids] if ids else list(TASKS.values())

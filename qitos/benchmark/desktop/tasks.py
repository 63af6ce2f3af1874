"""Scoring side, no gold (the agent side may read it): the desktop starter tasks as the agent knows them, one
`TaskCard` per task.

A card holds what a computer-use agent is told or can see for itself: the task id, the instruction, the app and
its setup (the windows, fields and buttons it shows on screen) and the step budget. Nothing here says how a task
is scored or solved: the checkers, the expected values, the targets, feasibility and the reference (oracle)
plans are gold and live in `gold.py`, a scoring-side-only module the agent host masks (see
`DesktopAdapter.scoring_side_sources`). Nothing on the agent side may import `gold.py`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TaskCard(BaseModel):
    """One starter task as the agent may know it: no targets, feasibility, checker or reference plan."""

    model_config = ConfigDict(frozen=True)

    id: str
    instruction: str
    app: str
    config: dict[str, Any] = Field(default_factory=dict)
    max_steps: int = 15


_REPORT_WINDOWS = [
    {"name": "main", "title": "Report viewer", "text": "Quarterly report: revenue up 4%.", "geometry": "420x260+90+90"},
]
_SETTINGS = {"checkboxes": [
    {"name": "notifications", "label": "Enable notifications", "initial": True},
    {"name": "dark_mode", "label": "Dark mode", "initial": False},
    {"name": "auto_update", "label": "Install updates automatically", "initial": True},
]}

CARDS: dict[str, TaskCard] = {c.id: c for c in [
    TaskCard(
        id="click-apply", app="buttons", max_steps=5,
        instruction="The settings dialog asks what to do with your changes. Click the 'Apply' button.",
        config={"title": "Unsaved settings", "message": "You changed 3 settings. What would you like to do?",
                "buttons": ["Help", "Cancel", "Revert", "Apply", "OK"]}),
    TaskCard(
        id="fill-contact-form", app="form", max_steps=15,
        instruction="Fill in the new contact form: full name 'Ada Lovelace', email 'ada@example.org', phone "
                    "'555-0142'. Then press Submit.",
        config={"title": "New contact", "heading": "New contact", "submit": "Submit", "fields": [
            {"name": "name", "label": "Full name"}, {"name": "email", "label": "Email"},
            {"name": "phone", "label": "Phone"}]}),
    TaskCard(
        id="pick-from-list", app="picker", max_steps=6,
        instruction="Choose 'Cherry' from the list of fruits and confirm with the Choose button.",
        config={"title": "Fruit of the month", "prompt": "Pick the fruit of the month:",
                "items": ["Apple", "Banana", "Cherry", "Date", "Elderberry", "Fig"]}),
    TaskCard(
        id="editor-type-and-save", app="editor", max_steps=8,
        instruction="Type the sentence 'Meeting moved to 3pm on Thursday.' into the empty editor and save the file.",
        config={"title": "Editor", "filename": "notes.txt", "initial_text": ""}),
    TaskCard(
        id="resize-window", app="windows", max_steps=6,
        instruction="Make the 'Report viewer' window at least 640 pixels wide and 480 pixels tall by resizing it.",
        config={"windows": _REPORT_WINDOWS}),
    TaskCard(
        id="close-window", app="windows", max_steps=5,
        instruction="Close the 'Tip of the day' window, but keep the 'Report viewer' window open.",
        config={"windows": _REPORT_WINDOWS + [
            {"name": "tip", "title": "Tip of the day", "text": "Tip: press F1 to open the help.",
             "geometry": "320x160+600+320"}]}),
    TaskCard(
        id="copy-between-fields", app="form", max_steps=10,
        instruction="Copy the licence key from the 'Licence key' field into the 'Activation code' field "
                    "(select it, copy with Ctrl+C, paste with Ctrl+V).",
        config={"title": "Activate product", "heading": "Product activation", "submit": None, "fields": [
            {"name": "licence", "label": "Licence key", "initial": "QX-4821-ZETA-77", "readonly": True},
            {"name": "activation", "label": "Activation code"}]}),
    TaskCard(
        id="toggle-checkbox", app="settings", max_steps=6,
        instruction="Turn on 'Dark mode', leave the other settings as they are, and press Save.",
        config={**_SETTINGS, "title": "Preferences"}),
    TaskCard(
        id="set-slider", app="settings", max_steps=8,
        instruction="Set the Volume slider to 70 and press Save.",
        config={"title": "Sound", "slider": {"name": "volume", "label": "Volume", "from": 0, "to": 100,
                                             "resolution": 10, "initial": 30}}),
    TaskCard(
        id="set-spinbox", app="settings", max_steps=8,
        instruction="Set the number of copies to 7 and press Save.",
        config={"title": "Print", "spinbox": {"name": "copies", "label": "Copies", "from": 1, "to": 20,
                                              "initial": 1}}),
    TaskCard(
        id="export-report-pdf", app="buttons", max_steps=5,
        instruction="Click the 'Export as PDF' button in the report dialog.",
        config={"title": "Report ready", "message": "Your quarterly report is ready.",
                "buttons": ["Print", "Save", "Close"]}),
]}


def get_card(task_id: str) -> TaskCard:
    try:
        return CARDS[task_id]
    except KeyError:
        raise KeyError(f"unknown desktop task '{task_id}'; known tasks: {', '.join(CARDS)}") from None


def task_ids() -> list[str]:
    """Every task id, in the catalogue's stable order."""
    return list(CARDS)


__all__ = ["CARDS", "TaskCard", "get_card", "task_ids"]

"""Scoring side: small Tk applications the desktop starter tasks run; each is `python -m qitos.benchmark.desktop.apps.<name>`.

Every app takes `--state <file> [--widgets <file>] [--config <json or file>]`, publishes its windows and widgets
(role, text, value, screen bounds) to the widgets file and its real state to the state file.
"""

from __future__ import annotations

APPS: dict[str, str] = {
    "buttons": "a dialog with a message and several buttons",
    "form": "labelled text fields with a submit button",
    "picker": "a list to choose one item from",
    "editor": "a plain-text editor that saves to a file",
    "settings": "check boxes, a slider and a spin box with a save button",
    "windows": "one or more plain windows that can be moved, resized and closed",
}


def module_for(app: str) -> str:
    """The module to run for an app name; raises ValueError naming the known apps."""
    if app not in APPS:
        raise ValueError(f"unknown desktop app '{app}'; known apps: {', '.join(sorted(APPS))}")
    return f"{__name__}.{app}"

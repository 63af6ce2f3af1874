"""Scoring side (a task app: its own process on the scoring side's display): a dialog with a message and a row of
buttons; the state records every button press in order.

Config: {"title": str, "message": str, "buttons": [label, ...], "geometry": "WxH+X+Y"}.
Widget names are the labels in lower case with spaces as underscores ("Save As" -> "save_as").
"""

from __future__ import annotations

import tkinter as tk
from functools import partial

from qitos.benchmark.desktop.apps.harness import AppHarness


def slug(label: str) -> str:
    return "_".join(label.lower().split())


def main(argv: list[str] | None = None) -> None:
    harness = AppHarness("buttons", __doc__ or "", argv)
    config, root = harness.config, harness.root
    harness.add_window("main", root, config.get("title", "Dialog"), config.get("geometry", "520x200+240+200"))
    message = tk.Label(root, text=config.get("message", "Choose an action."), wraplength=480, justify="left")
    message.pack(padx=16, pady=(20, 12), anchor="w")
    harness.track("message", "label", message, "main", text=message.cget("text"))
    row = tk.Frame(root)
    row.pack(padx=16, pady=12, anchor="e", side="bottom")
    harness.set(pressed=[], last_pressed=None)

    def press(name: str) -> None:
        harness.set(pressed=harness.data["pressed"] + [name], last_pressed=name)

    for label in config.get("buttons", ["Cancel", "OK"]):
        name = slug(label)
        button = tk.Button(row, text=label, width=max(8, len(label) + 2), command=partial(press, name))
        button.pack(side="left", padx=6)
        harness.track(name, "button", button, "main", text=label)
    harness.run()


if __name__ == "__main__":
    main()

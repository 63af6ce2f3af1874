"""Scoring side (a task app: its own process on the scoring side's display): a prompt, a list of items and a Choose
button; double-clicking an item also chooses it.

Config: {"title": str, "prompt": str, "items": [str], "choose": label, "geometry": "WxH+X+Y"}.
List rows are published as "list item" widgets named "item:<text>". State: selected (live), chosen
(the item confirmed last, or null), choose_count.
"""

from __future__ import annotations

import tkinter as tk

from qitos.benchmark.desktop.widgets import Bounds, Widget
from qitos.benchmark.desktop.apps.harness import AppHarness


def main(argv: list[str] | None = None) -> None:
    harness = AppHarness("picker", __doc__ or "", argv)
    config, root = harness.config, harness.root
    items: list[str] = list(config.get("items", []))
    harness.add_window("main", root, config.get("title", "Choose"), config.get("geometry", "420x380+260+140"))
    prompt = tk.Label(root, text=config.get("prompt", "Pick one item:"))
    prompt.pack(padx=16, pady=(16, 6), anchor="w")
    harness.track("prompt", "label", prompt, "main", text=prompt.cget("text"))
    listbox = tk.Listbox(root, height=min(len(items), 10) or 5, exportselection=False, activestyle="none")
    for item in items:
        listbox.insert("end", item)
    listbox.pack(padx=16, pady=6, fill="x")
    harness.set(selected=None, chosen=None, choose_count=0)

    def selected() -> str | None:
        picked = listbox.curselection()
        return items[picked[0]] if picked else None

    def rows() -> list[Widget]:
        out: list[Widget] = []
        left, top, width = listbox.winfo_rootx(), listbox.winfo_rooty(), listbox.winfo_width()
        current = set(listbox.curselection())
        for index, item in enumerate(items):
            box = listbox.bbox(index)
            if not box:
                continue  # scrolled out of view
            x, y, _, h = box
            out.append(Widget(name=f"item:{item}", role="list item", window="main", text=item,
                              value=index in current, bounds=Bounds(x=left + x, y=top + y, width=width - 2 * x,
                                                                    height=h)))
        return out

    harness.track("items", "list", listbox, "main", text=prompt.cget("text"), value=selected, children=rows)
    listbox.bind("<<ListboxSelect>>", lambda _: harness.set(selected=selected()))

    def choose(*_: object) -> None:
        harness.set(chosen=selected(), choose_count=harness.data["choose_count"] + 1)

    listbox.bind("<Double-Button-1>", choose)
    label = config.get("choose", "Choose")
    button = tk.Button(root, text=label, width=10, command=choose)
    button.pack(padx=16, pady=(8, 14), anchor="e")
    harness.track("choose", "button", button, "main", text=label)
    harness.run()


if __name__ == "__main__":
    main()

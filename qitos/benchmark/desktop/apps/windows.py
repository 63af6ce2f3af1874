"""Scoring side (a task app: its own process on the scoring side's display): one or more plain windows with a line of
text each; the state tracks which are open and their sizes.

Config: {"windows": [{"name", "title", "text", "geometry"}]}; the first window is the main one (closing it
ends the app). State: open (names of open windows), closed (names closed by the user, in order), sizes
({name: {"width", "height", "x", "y"}} of the client areas).
"""

from __future__ import annotations

import tkinter as tk
from functools import partial
from typing import Any

from qitos.benchmark.desktop.apps.harness import AppHarness


def main(argv: list[str] | None = None) -> None:
    harness = AppHarness("windows", __doc__ or "", argv)
    specs = harness.config.get("windows") or [{"name": "main", "title": "Window", "text": "Hello"}]
    tops: dict[str, tk.Tk | tk.Toplevel] = {}
    harness.set(open=[s["name"] for s in specs], closed=[], sizes={})

    def record_size(name: str) -> None:
        top = tops[name]
        try:
            size = {"width": top.winfo_width(), "height": top.winfo_height(), "x": top.winfo_rootx(),
                    "y": top.winfo_rooty()}
        except tk.TclError:
            return
        if harness.data["sizes"].get(name) != size:
            harness.set(sizes={**harness.data["sizes"], name: size})

    def resized(name: str, event: "tk.Event[Any]") -> None:
        if event.widget is tops[name]:  # children report their own Configure events too
            record_size(name)

    def close(name: str) -> None:
        harness.set(open=[n for n in harness.data["open"] if n != name], closed=harness.data["closed"] + [name])
        if name == specs[0]["name"]:
            harness.quit("window_closed")
            return
        harness.window_closed(name)
        tops[name].destroy()

    for index, spec in enumerate(specs):
        name = spec["name"]
        top = harness.root if index == 0 else tk.Toplevel(harness.root)
        tops[name] = top
        harness.add_window(name, top, spec.get("title", name), spec.get("geometry"))
        label = tk.Label(top, text=spec.get("text", ""), wraplength=int(spec.get("wrap", 360)), justify="left")
        label.pack(padx=20, pady=20, fill="both", expand=True)
        harness.track(f"{name}:text", "label", label, name, text=spec.get("text", ""))
        top.protocol("WM_DELETE_WINDOW", partial(close, name))
        top.bind("<Configure>", partial(resized, name))
    harness.run()


if __name__ == "__main__":
    main()

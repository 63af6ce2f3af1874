"""Scoring side (a task app: its own process on the scoring side's display): a settings panel: check boxes, an
optional slider and spin box, and a Save button.

Config: {"title": str, "checkboxes": [{"name", "label", "initial"?}], "slider": {"name", "label", "from",
"to", "resolution"?, "initial"?} or null, "spinbox": {"name", "label", "from", "to", "initial"?} or null,
"geometry": "WxH+X+Y"}. State: values (live), saved (values at the last Save, or null), save_count.
A slider also publishes its thumb as a "slider handle" widget named "<name>:handle".
"""

from __future__ import annotations

import tkinter as tk
from typing import Any

from qitos.benchmark.desktop.widgets import Bounds, Widget
from qitos.benchmark.desktop.apps.harness import AppHarness


def main(argv: list[str] | None = None) -> None:
    harness = AppHarness("settings", __doc__ or "", argv)
    config, root = harness.config, harness.root
    harness.add_window("main", root, config.get("title", "Settings"), config.get("geometry", "520x360+240+140"))
    variables: dict[str, tk.Variable] = {}
    harness.set(values={}, saved=None, save_count=0)

    def current() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, var in variables.items():
            try:
                out[name] = var.get()
            except tk.TclError:
                out[name] = None  # a spin box holding text that is not a number
        return out

    def publish(*_: Any) -> None:
        harness.set(values=current())

    body = tk.Frame(root)
    body.pack(fill="both", expand=True, padx=16, pady=12)
    row = 0
    for spec in config.get("checkboxes", []):
        name = spec["name"]
        variables[name] = var = tk.BooleanVar(value=bool(spec.get("initial", False)))
        box = tk.Checkbutton(body, text=spec.get("label", name), variable=var)
        box.grid(row=row, column=0, columnspan=2, sticky="w", pady=3)
        harness.track(name, "check box", box, "main", text=spec.get("label", name), value=var.get)
        var.trace_add("write", publish)
        row += 1

    slider = config.get("slider")
    if slider:
        name = slider["name"]
        variables[name] = svar = tk.IntVar(value=int(slider.get("initial", slider["from"])))
        tk.Label(body, text=slider.get("label", name) + ":").grid(row=row, column=0, sticky="w", pady=(12, 3))
        scale = tk.Scale(body, from_=slider["from"], to=slider["to"], resolution=slider.get("resolution", 1),
                         orient="horizontal", length=300, variable=svar, showvalue=True)
        scale.grid(row=row, column=1, sticky="w", pady=(12, 3))

        def thumb(scale: tk.Scale = scale, name: str = name) -> list[Widget]:
            x, y = scale.coords()
            length = int(scale.cget("sliderlength"))
            width = int(scale.cget("width"))
            bounds = Bounds(x=scale.winfo_rootx() + x - length // 2, y=scale.winfo_rooty() + y - width // 2,
                            width=length, height=width)
            return [Widget(name=f"{name}:handle", role="slider handle", window="main", text="", bounds=bounds,
                           value=scale.get())]

        harness.track(name, "slider", scale, "main", text=slider.get("label", name), value=svar.get, children=thumb,
                      extra={"minimum": slider["from"], "maximum": slider["to"],
                             "step": slider.get("resolution", 1)})
        svar.trace_add("write", publish)
        row += 1

    spin = config.get("spinbox")
    if spin:
        name = spin["name"]
        variables[name] = nvar = tk.IntVar(value=int(spin.get("initial", spin["from"])))
        tk.Label(body, text=spin.get("label", name) + ":").grid(row=row, column=0, sticky="w", pady=(12, 3))
        spin_box = tk.Spinbox(body, from_=spin["from"], to=spin["to"], textvariable=nvar, width=6)
        spin_box.grid(row=row, column=1, sticky="w", pady=(12, 3))
        harness.track(name, "spin box", spin_box, "main", text=spin.get("label", name), value=spin_box.get,
                      extra={"minimum": spin["from"], "maximum": spin["to"]})
        nvar.trace_add("write", publish)
        row += 1
    publish()

    def save() -> None:
        harness.set(saved=current(), save_count=harness.data["save_count"] + 1)

    button = tk.Button(root, text="Save", width=10, command=save)
    button.pack(padx=16, pady=(0, 14), anchor="e")
    harness.track("save", "button", button, "main", text="Save")
    harness.run()


if __name__ == "__main__":
    main()

"""Scoring side (a task app: its own process on the scoring side's display): labelled text fields and an optional
submit button; live values, pastes and submissions go to the state.

Config: {"title": str, "heading": str, "fields": [{"name", "label", "initial"?, "readonly"?}],
"submit": label or null, "geometry": "WxH+X+Y"}. State: values (live), submitted (values at the last
submit, or null), submit_count, paste_count (Ctrl+V / middle-click pastes into any field).
"""

from __future__ import annotations

import tkinter as tk
from typing import Any

from qitos.benchmark.desktop.apps.harness import AppHarness


def main(argv: list[str] | None = None) -> None:
    harness = AppHarness("form", __doc__ or "", argv)
    config, root = harness.config, harness.root
    harness.add_window("main", root, config.get("title", "Form"), config.get("geometry", "560x320+220+160"))
    if config.get("heading"):
        heading = tk.Label(root, text=config["heading"], font="TkDefaultFont 12 bold")
        heading.grid(row=0, column=0, columnspan=2, padx=16, pady=(16, 8), sticky="w")
        harness.track("heading", "label", heading, "main", text=config["heading"])
    variables: dict[str, tk.StringVar] = {}
    harness.set(values={}, submitted=None, submit_count=0, paste_count=0)

    def publish_values(*_: Any) -> None:
        harness.set(values={name: var.get() for name, var in variables.items()})

    def pasted(_: "tk.Event[Any]") -> None:
        harness.set(paste_count=harness.data["paste_count"] + 1)

    for row, spec in enumerate(config.get("fields", []), start=1):
        name = spec["name"]
        label = tk.Label(root, text=spec.get("label", name) + ":")
        label.grid(row=row, column=0, padx=(16, 8), pady=6, sticky="e")
        variables[name] = var = tk.StringVar(value=spec.get("initial", ""))
        entry = tk.Entry(root, textvariable=var, width=int(spec.get("width", 32)))
        if spec.get("readonly"):
            entry.configure(state="readonly")
        entry.grid(row=row, column=1, padx=(0, 16), pady=6, sticky="w")
        entry.bind("<<Paste>>", pasted, add="+")
        entry.bind("<<PasteSelection>>", pasted, add="+")
        harness.track(name, "text field", entry, "main", text=spec.get("label", name), value=var.get)
        var.trace_add("write", publish_values)
    publish_values()

    if config.get("submit", "Submit"):
        def submit() -> None:
            values = {name: var.get() for name, var in variables.items()}
            harness.set(submitted=values, submit_count=harness.data["submit_count"] + 1)

        label = config.get("submit", "Submit")
        button = tk.Button(root, text=label, width=10, command=submit)
        button.grid(row=len(variables) + 1, column=1, padx=(0, 16), pady=(14, 8), sticky="e")
        harness.track("submit", "button", button, "main", text=label)
    harness.run()


if __name__ == "__main__":
    main()

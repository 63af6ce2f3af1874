"""Scoring side (a task app: its own process on the scoring side's display): a plain-text editor with a Save button
(and Ctrl+S) that writes the text to a file next to the state file.

Config: {"title": str, "filename": str, "initial_text": str, "geometry": "WxH+X+Y"}. State: saved_path,
save_count, modified (unsaved edits exist), length (characters in the buffer). The file on disk is the
ground truth checkers read.
"""

from __future__ import annotations

import tkinter as tk
from typing import Any

from qitos.benchmark.desktop.apps.harness import AppHarness


def main(argv: list[str] | None = None) -> None:
    harness = AppHarness("editor", __doc__ or "", argv)
    config, root = harness.config, harness.root
    filename = config.get("filename", "document.txt")
    if "/" in filename or filename.startswith("."):
        raise SystemExit(f"filename must be a plain file name, got {filename!r}")
    path = harness.state_path.parent / filename
    harness.add_window("main", root, f"{filename} - {config.get('title', 'Editor')}",
                       config.get("geometry", "600x420+200+120"))
    bar = tk.Frame(root)
    bar.pack(fill="x", padx=8, pady=(8, 4))
    text = tk.Text(root, width=60, height=16, undo=True, wrap="word")
    text.insert("1.0", config.get("initial_text", ""))
    text.edit_modified(False)
    text.pack(fill="both", expand=True, padx=8, pady=(0, 8))
    harness.set(saved_path=None, save_count=0, modified=False, length=len(text.get("1.0", "end-1c")))

    def save(*_: Any) -> str:
        content = text.get("1.0", "end-1c")
        path.write_text(content, encoding="utf-8")
        text.edit_modified(False)
        harness.set(saved_path=str(path), save_count=harness.data["save_count"] + 1, modified=False)
        return "break"

    def changed(_: Any) -> None:
        harness.set(modified=bool(text.edit_modified()), length=len(text.get("1.0", "end-1c")))

    button = tk.Button(bar, text="Save", width=8, command=save)
    button.pack(side="left")
    hint = tk.Label(bar, text=f"saves to {filename}")
    hint.pack(side="left", padx=10)
    text.bind("<<Modified>>", changed)
    text.bind("<KeyRelease>", changed, add="+")
    root.bind("<Control-s>", save)
    harness.track("save", "button", button, "main", text="Save")
    harness.track("file_hint", "label", hint, "main", text=hint.cget("text"))
    harness.track("document", "text area", text, "main", text="document",
                  value=lambda: text.get("1.0", "end-1c"))
    harness.run()


if __name__ == "__main__":
    main()

"""Scoring side. The staged work dir as upstream's prompt shows it: run_task.py's ``ls`` and ``tree -I ...`` of the
agent's folder, reproduced byte for byte (names in C-locale order, tree 2.x's line drawing and escapes) without
running either program, so the sandbox needs neither and the prompt is the same on every host."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path


def ls_output(folder: Path) -> str:
    """`ls` piped (one name a line, no dotfiles, sorted as in the C locale)."""
    names = sorted((p.name for p in folder.iterdir() if not p.name.startswith(".")), key=os.fsencode) \
        if folder.is_dir() else []
    return "".join(f"{name}\n" for name in names)


def tree_output(folder: Path, ignore: list[str]) -> str:
    """`tree -I pattern` run in `folder` by upstream's run_task.py (tree 2.x). Its image sets no locale, so Python
    (PEP 538) runs it with LC_CTYPE=C.UTF-8 and collation C: UTF-8 line drawing, names in byte order, characters
    that are not printable as octal escapes, the root counted as a directory."""
    counts = [1, 0]  # directories (the root included, as tree 2 counts), files
    lines = ["."]

    def walk(path: Path, prefix: str) -> None:
        try:
            entries = [p for p in path.iterdir() if not p.name.startswith(".")
                       and not any(fnmatch.fnmatchcase(p.name, pat) for pat in ignore)]
        except OSError:
            return
        entries.sort(key=lambda p: os.fsencode(p.name))
        for i, entry in enumerate(entries):
            last = i == len(entries) - 1
            name = _escaped(entry.name)
            if entry.is_symlink():
                name = f"{name} -> {_escaped(str(Path(entry).readlink()))}"
            lines.append(f"{prefix}{'└── ' if last else '├── '}{name}")
            if entry.is_dir() and not entry.is_symlink():
                counts[0] += 1
                walk(entry, prefix + ("    " if last else "│\u00a0\u00a0 "))  # tree's own no-break spaces
            else:
                counts[1] += 1

    if folder.is_dir():
        walk(folder, "")
    dirs = f"{counts[0]} director{'y' if counts[0] == 1 else 'ies'}"
    files = f"{counts[1]} file{'' if counts[1] == 1 else 's'}"
    return "\n".join(lines) + f"\n\n{dirs}, {files}\n"


def _escaped(name: str) -> str:
    """tree's default quoting in a UTF-8 locale: printable characters as they are, every byte of anything else
    (control characters, invalid UTF-8) as a backslash and three octal digits."""
    raw = os.fsencode(name)
    out, i = [], 0
    while i < len(raw):
        for size in (1, 2, 3, 4):
            try:
                char = raw[i:i + size].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            char, size = "", 1
        if char and char.isprintable():
            out.append(char)
        else:
            out.extend(f"\\{b:03o}" for b in raw[i:i + size])
        i += size
    return "".join(out)

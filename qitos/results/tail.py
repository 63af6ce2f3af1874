"""Rows cut short by a crash: find them, set them aside in `<file>.damaged`, never lose a byte.

A row goes to the results file in one write; a process killed in the middle of it (SIGKILL, the OOM
killer, a power cut) leaves the start of a row and no newline. `ResultsFile.append` starts its write
with a newline when the file does not end in one, so the fragment stays a line of its own; versions
before that glued the next row onto the fragment, and that row could no longer be read.

`qit bench run` repairs the file it is about to append to: each cut line is appended to
`<file>.damaged` (and fsynced) before the results file changes, a whole row found glued after a
fragment stays in the results file, and the cut task runs again (no readable row says it is done).
A cut line is the file's last line when it has no newline and is not a whole row, or any line that
starts like a JSON object and does not parse; other unreadable lines are left for the readers to
report.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROW_START = '{"task_id":'  # how every row QitOS writes begins (task_id is the first field)
_DECODER = json.JSONDecoder()
_TASK = re.compile(rb'^\{"task_id":("(?:[^"\\]|\\.)*")')
_TRIAL = re.compile(rb'"trial":(\d+)[,}]')  # a number cut short is not the trial


@dataclass(frozen=True)
class CutLine:
    """One line cut short: where it was, the bytes set aside (the fragment) and the whole rows found glued
    to it, which stay in the results file."""

    line: int
    fragment: bytes
    recovered: tuple[bytes, ...] = ()

    @property
    def task_id(self) -> str | None:
        match = _TASK.match(self.fragment)
        if match is None:
            return None
        try:
            value = orjson.loads(match.group(1))
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, str) else None

    @property
    def trial(self) -> int | None:
        match = _TRIAL.search(self.fragment)
        return int(match.group(1)) if match else None

    def recovered_rows(self) -> list[dict[str, Any]]:
        return [orjson.loads(row) for row in self.recovered]

    def describe(self) -> str:
        """`task t3 trial 0` (what the fragment still says), or `a row` when too little of it is left."""
        if self.task_id is None:
            return "a row"
        return f"task {self.task_id}" + (f" trial {self.trial}" if self.trial is not None else "")

    def warning(self, path: Path, reruns: bool | None, dry_run: bool = False) -> str:
        """One line for `qit bench run`; `reruns`: whether this run runs the cut task again (None: unknown task)."""
        glued = f"{len(self.recovered)} whole row(s) glued to it" if self.recovered else ""
        if not self.fragment:
            return f"{path} line {self.line}: {glued} {'would be ' if dry_run else ''}split onto their own lines"
        again = {True: "; it runs again", False: "", None: "; its task runs again (no row says it is done)"}[reruns]
        kept = f"; {glued} kept" if glued else ""
        moved = "a run moves it" if dry_run else "moved"
        return (f"{path} line {self.line}: {self.describe()} was cut short (a write interrupted by a crash): "
                f"{moved} to {damaged_path(path)}{kept}{again}")


def warnings_for(path: Path, cut: list[CutLine], to_run: set[tuple[str, int]], dry_run: bool,
                 limit: int = 5) -> list[str]:
    """`qit bench run`'s warnings about the cut lines it set aside (at most `limit`, then a count)."""
    out = [c.warning(path, None if c.task_id is None or c.trial is None else (c.task_id, c.trial) in to_run,
                     dry_run) for c in cut[:limit]]
    if len(cut) > limit:
        out.append(f"{path}: and {len(cut) - limit} more row(s) cut short, "
                   f"{'to be moved' if dry_run else 'moved'} to {damaged_path(path)}")
    return out


def damaged_path(path: Path) -> Path:
    return path.with_name(path.name + ".damaged")


def _split_glued(line: bytes) -> tuple[bytes, tuple[bytes, ...]]:
    """(the fragments, the whole rows) of a line where appends before `ResultsFile.append` wrote its
    leading newline glued a row onto a fragment (or onto a row that lacked only its newline)."""
    text = line.decode("utf-8", "surrogateescape")  # a fragment may end inside a character
    fragments, rows, pos = [], [], 0
    while pos < len(text):
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            value = end = None
        if end is not None and isinstance(value, dict) and "task_id" in value:
            rows.append(text[pos:end].encode("utf-8", "surrogateescape"))
            pos = end
            continue
        start = text.find(ROW_START, pos + 1)
        fragments.append(text[pos:start if start != -1 else len(text)])
        if start == -1:
            break
        pos = start
    return "".join(fragments).encode("utf-8", "surrogateescape"), tuple(rows)


def find_cut_lines(data: bytes) -> list[CutLine]:
    """The cut lines of a results file's bytes."""
    cut = []
    lines = data.split(b"\n")
    last = len(lines) - 1  # the bytes after the final newline (b"" when the file ends in one)
    for index, raw in enumerate(lines):
        line = raw.rstrip(b"\r")
        if not line.strip():
            continue
        unterminated = index == last
        if not (unterminated or line.lstrip().startswith(b"{")):
            continue  # not a row's beginning: the readers report it
        try:
            orjson.loads(line)
            continue  # a whole row (the last may lack only its newline: the next append adds it), or JSON
        except orjson.JSONDecodeError:  # that is no row, which the readers report
            pass
        fragment, recovered = _split_glued(line)
        cut.append(CutLine(index + 1, fragment, recovered))
    return cut


def inspect(path: Path) -> list[CutLine]:
    """The cut lines of the file at `path`, read only."""
    try:
        return find_cut_lines(path.read_bytes())
    except FileNotFoundError:
        return []


def repair(path: Path) -> list[CutLine]:
    """Set every cut line aside (appended to `<file>.damaged`, fsynced) and take it out of the results file.

    Runs under the results file's exclusive lock, so no append lands in the middle. When only the file's
    tail is cut, the file is truncated in place; otherwise it is rewritten to a temporary file and renamed
    over the original (appends check that they still hold the current file).
    """
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = _read_all(fd)
        cut = find_cut_lines(data)
        if not cut:
            return []
        _set_aside(damaged_path(path), cut)
        lines = data.split(b"\n")
        first = cut[0].line - 1
        offset = sum(len(line) + 1 for line in lines[:first])
        by_line = {c.line - 1: c for c in cut}
        tail_only = all((i in by_line and not by_line[i].recovered) or not lines[i].strip()
                        for i in range(first, len(lines)))
        if tail_only:
            os.ftruncate(fd, offset)
            os.fsync(fd)
        else:
            kept = []
            for i, line in enumerate(lines[:-1] if data.endswith(b"\n") else lines):
                found = by_line.get(i)
                if found is None:
                    kept.append(line + b"\n")
                else:
                    kept.extend(row + b"\n" for row in found.recovered)
            replace_locked(path, b"".join(kept))
        return cut
    finally:
        os.close(fd)  # releases the lock


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def append_on_own_line(fd: int, data: bytes) -> None:
    """Append `data` to the file open (O_APPEND, locked) as `fd`, starting a new line first when the file's last
    byte is not one, so a fragment a killed writer left stays a line of its own."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data
    write_all(fd, data)


def replace_locked(path: Path, content: bytes) -> None:
    """Atomically replace `path` with `content` (the caller holds the lock on the current file)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _sync_dir(path.parent)


def _set_aside(target: Path, cut: list[CutLine]) -> None:
    data = b"".join(c.fragment + b"\n" for c in cut if c.fragment)
    if not data:
        return
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        append_on_own_line(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    _sync_dir(target.parent)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""Random access to a trace's JSONL files: read one page of lines without loading the rest.

A `LineIndex` keeps the byte offset of every line (an `array('q')`, 8 bytes a line) and
grows incrementally when the file grows (a run still being written). Pages are read by
seeking. A line that is not valid JSON is reported with its number; a last line without
its newline is "being written" (or torn by a crash) and reported as such, never fatal.
"""

from __future__ import annotations

import json
import os
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

CHUNK = 1 << 20


@dataclass
class LineProblem:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file} line {self.line}: {self.message}"


class LineIndex:
    """Offsets of the complete lines of one file, plus the unterminated tail if any."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.starts = array("q")
        self.end = 0  # offset just past the last complete line
        self.size = 0
        self.ino: int | None = None
        self._lock = threading.Lock()

    def update(self) -> None:
        """Catch up with the file: rescan from scratch if it was replaced or shrank, else extend."""
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                self.starts, self.end, self.size, self.ino = array("q"), 0, 0, None
                return
            if st.st_ino != self.ino or st.st_size < self.end:
                self.starts, self.end, self.ino = array("q"), 0, st.st_ino
            if st.st_size == self.size and self.end:
                return
            with open(self.path, "rb") as fh:
                fh.seek(self.end)
                pos = self.end
                while True:
                    chunk = fh.read(CHUNK)
                    if not chunk:
                        break
                    start = 0
                    while True:
                        nl = chunk.find(b"\n", start)
                        if nl < 0:
                            break
                        self.starts.append(self.end)
                        self.end = pos + nl + 1
                        start = nl + 1
                    pos += len(chunk)
            self.size = pos

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def has_tail(self) -> bool:
        return self.size > self.end

    def read_lines(self, first: int, last: int) -> list[tuple[int, bytes]]:
        """(1-based line number, raw bytes) for lines first..last-1 (0-based, complete lines only)."""
        first, last = max(0, first), min(last, self.count)
        if first >= last:
            return []
        begin = self.starts[first]
        stop = self.starts[last] if last < self.count else self.end
        with open(self.path, "rb") as fh:
            fh.seek(begin)
            blob = fh.read(stop - begin)
        out = []
        for i in range(first, last):
            a = self.starts[i] - begin
            b = (self.starts[i + 1] - begin) if i + 1 < last else len(blob)
            out.append((i + 1, blob[a:b]))
        return out

    def read_tail(self) -> bytes:
        if not self.has_tail:
            return b""
        with open(self.path, "rb") as fh:
            fh.seek(self.end)
            return fh.read(self.size - self.end)


def parse_line(name: str, number: int, raw: bytes, problems: list[LineProblem]) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        problems.append(LineProblem(name, number, f"not valid JSON ({str(exc)[:80]})"))
        return None
    if not isinstance(value, dict):
        problems.append(LineProblem(name, number, "not a JSON object"))
        return None
    return value


def tail_problem(index: LineIndex) -> LineProblem | None:
    """Describe an unterminated last line: a record still being written or torn by a crash."""
    tail = index.read_tail()
    if not tail.strip():
        return None
    try:
        json.loads(tail)
        message = "last record has no newline yet (still being written)"
    except ValueError:
        message = f"last line is incomplete ({len(tail)} bytes; still being written, or torn by a crash)"
    return LineProblem(index.path.name, index.count + 1, message)


T = TypeVar("T")


class LRU(Generic[T]):
    """A small thread-safe LRU keyed by string (bounded memory for per-run caches)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, make: Callable[[], T]) -> T:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

"""BenchmarkRunResult rows and the results JSONL file: append durably, read tolerantly.

One row per task × trial. Rows are appended, flushed and fsynced as each task ends, so a
crash loses nothing that finished. Reading keeps going past bad lines and reports each one
with file and line number; unknown keys are kept in `metadata`. `success` is strict: JSON
true, false or null, never a string or number coerced into one ("false" is not a success).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson
from pydantic import BaseModel, Field, StrictBool

from qitos.results import tail as results_tail
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.results.tail import CutLine
from qitos.models.base import Usage
from qitos.trace.durability import FLUSHER, fsync_path
from qitos.trace.redact import redact_text

# Rows with these stop reasons do not count as done for resume.
NOT_DONE_REASONS = frozenset({"cancelled", "not_executed"})  # outside-the-agent rows: see runner.plan_batch


class BenchmarkRunResult(BaseModel):
    task_id: str
    benchmark: str
    split: str | None = None
    subset: str | None = None
    trial: int = 0
    model: str | None = None
    recipe: str | None = None
    selected_tasks: int | None = None  # tasks the batch selected (the denominator's task count)
    trials_requested: int | None = None  # trials per task the batch asked for (pass^k's n)
    prediction: Any = None
    success: StrictBool | None = None  # lax mode would read "false" or "no" as a bool
    score: float | None = None
    stop_reason: str
    steps: int = 0
    latency_seconds: float = 0.0
    token_usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
    trace_run_dir: str | None = None
    run_spec_ref: str | None = None
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    placement: dict[str, Any] | None = None  # where a Ray job ran: node id, host, provider instance, attempt


_FIELDS = frozenset(BenchmarkRunResult.model_fields)


@dataclass
class RowIssue:
    file: str
    line: int
    message: str
    unparsable: bool = False  # not JSON at all (a row cut short by a crash, or not a results file)

    def __str__(self) -> str:
        return f"{self.file} line {self.line}: {self.message}"


def normalize_row(raw: dict[str, Any]) -> dict[str, Any]:
    """Move unknown keys into metadata (tolerant reading of older or foreign rows)."""
    if raw.keys() <= _FIELDS:
        return raw
    extra = {k: v for k, v in raw.items() if k not in _FIELDS}
    row = {k: v for k, v in raw.items() if k in _FIELDS}
    row["metadata"] = {**(raw.get("metadata") or {}), **extra}
    return row


def iter_numbered_rows(path: Path, issues: list[RowIssue] | None = None, required: tuple[str, ...] = ("task_id",),
                       strict: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, row as a plain dict) (fast path for eval); bad lines and rows missing a `required`
    field become RowIssues (eval asks for benchmark and stop_reason too, so such rows are never grouped as None).

    A `success` that is not true, false or null is bad input: with `strict` (eval) it raises a
    BenchmarkUsageError naming file, line and task; otherwise the row is left out with a RowIssue.
    """
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                raw = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                if not line.strip():
                    continue
                if issues is not None:
                    issues.append(RowIssue(str(path), number, _unparsable(line, exc), unparsable=True))
                continue
            if not isinstance(raw, dict) or "task_id" not in raw:
                if issues is not None:
                    issues.append(RowIssue(str(path), number, "not a result row (needs an object with 'task_id')"))
                continue
            missing = [name for name in required if raw.get(name) is None]
            if missing:
                if issues is not None:
                    issues.append(RowIssue(str(path), number, f"task {raw['task_id']}: missing field(s) "
                                                              f"{', '.join(missing)}; the row is left out"))
                continue
            success = raw.get("success")
            if success is not None and success.__class__ is not bool:
                message = f"task {raw['task_id']}: success must be true, false or null, not {_short(success)}"
                if strict:
                    raise BenchmarkUsageError(f"{path} line {number}: {message}")
                if issues is not None:
                    issues.append(RowIssue(str(path), number, message + "; the row is left out"))
                continue
            yield number, normalize_row(raw)


def _unparsable(line: bytes, exc: orjson.JSONDecodeError) -> str:
    message = f"not valid JSON ({exc.msg} at column {exc.colno})"
    if line.startswith(results_tail.ROW_START.encode()) or (line.startswith(b"{") and not line.endswith(b"\n")):
        message += ("; a row cut short (a write interrupted by a crash): `qit bench run` with this --output "
                    "moves it to .damaged and runs its task again")
    return message


def iter_rows(path: Path, issues: list[RowIssue] | None = None, required: tuple[str, ...] = ("task_id",),
              strict: bool = False) -> Iterator[dict[str, Any]]:
    """`iter_numbered_rows` without the line numbers."""
    for _, row in iter_numbered_rows(path, issues, required, strict):
        yield row


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def read_results(path: Path, issues: list[RowIssue] | None = None) -> list[BenchmarkRunResult]:
    rows = []
    for number, raw in iter_numbered_rows(path, issues):
        try:
            rows.append(BenchmarkRunResult.model_validate(raw))
        except ValueError as exc:
            if issues is not None:
                issues.append(RowIssue(str(path), number, f"task {raw.get('task_id')}: {str(exc).splitlines()[0]}"))
    return rows


class ResultsFile:
    """Append-only results JSONL, safe to use from many worker threads and processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.cut: list[CutLine] = []  # rows cut short by a crash that the last `existing()` met

    def existing(self) -> list[dict[str, Any]]:
        """The readable rows, with whole rows found glued to a cut line (`self.cut`, looked for only when a
        line is not JSON at all)."""
        if not self.path.exists():
            self.cut = []
            return []
        issues: list[RowIssue] = []
        rows = list(iter_rows(self.path, issues))
        self.cut = results_tail.inspect(self.path) if any(i.unparsable for i in issues) else []
        rows.extend(normalize_row(row) for c in self.cut for row in c.recovered_rows()
                    if isinstance(row.get("task_id"), str))
        return rows

    def repair(self) -> list[CutLine]:
        """Move rows cut short into `<file>.damaged` before appending (see `results_tail`); the lines moved."""
        if not self.path.exists():
            return []
        with self._lock:
            return results_tail.repair(self.path)

    def append(self, row: BenchmarkRunResult, wait: bool = True) -> int:
        """Append one row, durably. Safe across threads and across worker processes appending to the same
        file: the line goes out in one O_APPEND write under an exclusive lock, so rows never interleave.
        `wait=False`: return once the row is written (in the page cache); a `commit.RowCommitter` then makes it
        durable with its trace (the returned ticket is `FLUSHER.sync`'s, for a caller that waits itself).

        A write cut short by a crash leaves no newline at the end: this write then starts with one, so the
        fragment stays a line of its own (set aside by `repair`) and this row stays readable."""
        data = (redact_text(row.model_dump_json()) + "\n").encode("utf-8")  # a prediction may echo a key
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = self._open_locked()
            try:
                if os.fstat(fd).st_size == 0:  # a new file: its name made durable once, not with every row
                    fsync_path(str(self.path.parent))
                results_tail.append_on_own_line(fd, data)
            finally:
                os.close(fd)  # closing releases the lock
            ticket = FLUSHER.mark_files((os.path.abspath(self.path),))
        if wait:
            FLUSHER.sync(ticket)  # durable before we report the row as saved; concurrent appends share one flush
        return ticket

    def _open_locked(self) -> int:
        """A descriptor of the current file, exclusively locked; a file renamed over the one we locked (a
        repair or --retry-errors rewrite in another process) is opened again."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    return fd
            except FileNotFoundError:
                pass
            os.close(fd)

    def rewrite_without(self, drop: Iterable[tuple[str, int]]) -> int:
        """Atomically remove rows for the given (task_id, trial) pairs; returns how many were dropped."""
        drop_set = set(drop)
        if not drop_set or not self.path.exists():
            return 0
        with self._lock:
            fd = self._open_locked()
            try:
                kept, dropped = [], 0
                with open(self.path, "rb") as fh:
                    for line in fh:
                        try:
                            raw = json.loads(line)
                            key = (raw.get("task_id"), int(raw.get("trial", 0)))
                        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, TypeError, ValueError):
                            kept.append(line)
                            continue
                        if key in drop_set:
                            dropped += 1
                        else:
                            kept.append(line if line.endswith(b"\n") else line + b"\n")
                results_tail.replace_locked(self.path, b"".join(kept))
            finally:
                os.close(fd)
        return dropped

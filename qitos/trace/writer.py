"""TraceWriter: appends events and steps as they happen and keeps `manifest.json` current.

Durability rules (the trace contract): the manifest is rewritten atomically (temp file, then
rename) at start, after every step and at the end; every JSONL line is written whole and
flushed (lines that arrive together, `held()`, in one write), so a SIGKILL leaves a valid manifest
and whole lines. Disk flushes are group-committed
(see `durability.py`): within about half a second in the background, and synchronously when the run ends.
`fsync="always"` restores a flush per write. `finalize()` is idempotent and is called on every
exit path by the engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from .durability import FLUSHER
from .liveness import own_start
from .manifest_json import ManifestEncoder
from .redact import Redactor
from .schema import SCHEMA_VERSION, Manifest, OfficialCheck, RunSummary
from .swap import exchange

_HOST = socket.gethostname()
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class TraceDirError(OSError):
    """The log directory cannot be created or written (a user-fixable problem)."""


_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")  # utc_now()'s shape


def utc_now() -> str:
    """Now as `2026-12-06T13:00:41.284Z` (UTC, milliseconds). Every event and manifest write asks: the formatted
    second is kept and only the milliseconds are formatted anew (a third of `datetime.isoformat`'s cost)."""
    second, ms = divmod(time.time_ns() // 1_000_000, 1000)
    cached = _NOW
    if cached[0] != second:
        cached = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        globals()["_NOW"] = cached  # one assignment: a thread sees the old pair or the new, never half of each
    return f"{cached[1]}.{ms:03d}Z"


_NOW: tuple[int, str] = (-1, "")


def sanitize(part: str, limit: int = 60, keep: str = "head") -> str:
    clean = _UNSAFE.sub("-", part).strip("-")
    clean = clean[-limit:].lstrip("-") if keep == "tail" else clean[:limit]
    return clean or "x"


def new_run_id(prefix: str, task_id: str, trial: int = 0) -> str:
    """`<benchmark or agent>_<task id>_<trial>_<UTC yyyymmddTHHMMSS>_<6 hex>`: unique and sortable."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    # long task ids keep their tail: the distinctive part (a task's name) usually comes last
    return f"{sanitize(prefix, 30)}_{sanitize(task_id, keep='tail')}_{trial}_{stamp}_{secrets.token_hex(3)}"


_CHECKED_DIRS: set[str] = set()


def ensure_writable_dir(path: Path) -> Path:
    """Create `path` and prove it is writable (once per process), or raise TraceDirError naming the fix."""
    if str(path) in _CHECKED_DIRS and path.is_dir():
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".qitos-write-probe-{os.getpid()}-{secrets.token_hex(4)}"
        probe.write_text("ok")
        probe.unlink()
        _CHECKED_DIRS.add(str(path))
    except OSError as exc:
        raise TraceDirError(
            f"cannot write traces to '{path}': {exc.strerror or exc}. "
            "Choose a writable directory with --trace-logdir (or fix its permissions)."
        ) from exc
    return path


# orjson writes what `json.dumps(..., ensure_ascii=False, separators=(",", ":"), default=str)` wrote, a third of the
# cost (measured on a task's records), except non-finite floats: null, where `json` wrote `NaN`, which no strict
# JSON reader (a browser's `JSON.parse`) accepts. Datetimes and dataclasses go to `default=str`, as before.
TRACE_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _dumps(record: Any) -> str:
    try:
        return orjson.dumps(record, default=str, option=TRACE_JSON_OPTIONS).decode("utf-8")
    except TypeError:  # what orjson refuses (an integer beyond 64 bits, a lone surrogate): the standard codec
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
# The manifest's temporary file is overwritten in place and then cut to length, never opened with O_TRUNC:
# ext4 treats truncate-to-zero-then-rewrite as a replace-by-truncate and flushes the file on close
# (auto_da_alloc): benchmarks/trace_overhead.py measured 0.87 ms of tracing per step that way, 0.19 ms without.
_OVERWRITE = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_all_at(fd: int, data: bytes) -> None:
    """Write `data` from the start of the file (the rest is cut by the caller)."""
    view, offset = memoryview(data), 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)


class TraceWriter:
    """Writes one run's three files through plain file descriptors.

    Every event and step is one `write` of a whole line (no Python buffering, so nothing waits in memory
    for a flush), and the writer counts the bytes it wrote: `integrity()` then proves the files on disk
    hold exactly those lines without reading them back.
    """

    def __init__(self, logdir: Path | str, run_id: str, redactor: Redactor | None = None,
                 fsync: bool | str = "group") -> None:
        self.logdir = ensure_writable_dir(Path(logdir))
        self.run_id = run_id
        self.run_dir = self.logdir / run_id
        self.run_dir.mkdir(parents=True, exist_ok=False)
        self.redactor = redactor or Redactor()
        self._encoder = ManifestEncoder(self.redactor)
        # "group" (default): batched background flushes + a synchronous one at the end;
        # "always" (or True): flush every write; "never" (or False): leave it to the OS.
        self.fsync = {True: "always", False: "never"}.get(fsync, fsync)  # type: ignore[arg-type]
        # A batch whose result row is made durable right after the run sets this False: that flush covers the
        # trace too, so the run's end need not wait for the disk twice.
        self.sync_at_end = True
        # ... and such a batch keeps the final status out of the manifest (it stays `running`, everything else
        # final) until that row is durable: `seal_trace` then writes it. A trace never says it is complete
        # while its row could still be lost.
        self.hold_status = False
        self._events = os.open(self.run_dir / "events.jsonl", _APPEND, 0o644)
        self._steps = os.open(self.run_dir / "steps.jsonl", _APPEND, 0o644)
        self._written = {"events.jsonl": 0, "steps.jsonl": 0}
        self._manifest_path = self.run_dir / "manifest.json"
        self._manifest_tmp = self.run_dir / f".manifest.json.{os.getpid()}.tmp"
        self._manifest_written = False
        self._tmp_holds_old = False  # after an exchange the temporary file holds the previous manifest
        # what a group flush makes durable: the three files, and the two directories that name them
        self._durable_paths = tuple(str(p) for p in (self.run_dir / "events.jsonl", self.run_dir / "steps.jsonl",
                                                       self._manifest_path, self.run_dir, self.logdir))
        now = utc_now()
        self.manifest = Manifest(
            run_id=run_id,
            created_at=now,
            updated_at=now,
            writer={"pid": os.getpid(), "host": _HOST, "started": own_start()},
        )
        self._seq = 0
        self._finalized = False
        # the first manifest is written by the caller once it has filled in the run's identity

    # -- appends ---------------------------------------------------------------------------
    def _append(self, fd: int, name: str, record: Any) -> None:
        data = (self.redactor.scrub_json(record, _dumps) + "\n").encode("utf-8")  # by key and by value
        if self._held is not None:
            self._held.setdefault(name, []).append(data)
            return
        _write_all(fd, data)
        self._written[name] += len(data)

    _held: dict[str, list[bytes]] | None = None  # file name -> lines waiting for the end of `held()`

    _manifest_due = False  # a rewrite asked for inside `held()`, done when it ends

    @contextlib.contextmanager
    def held(self, manifest_follows: bool = False) -> Iterator[None]:
        """Lines appended inside go out together when it ends (one `write` per file): a batch of records that
        arrived together (the scoring side applies the agent side's stream in batches) costs one system call per
        file instead of one per line. Lines are still whole, in order, and written before any manifest rewrite.

        Manifest rewrites asked for inside (a step's, the stream's `write_manifest`) become one, after the lines.
        `manifest_follows`: the caller writes the final manifest next (the batch ends the run), so that one
        rewrite is left to `finalize` (the steps file already holds the step)."""
        if self._held is not None:  # already holding: the outer block writes
            yield
            return
        self._held = {}
        try:
            yield
        finally:
            self._write_held()
            self._held = None
            if self._manifest_due and not manifest_follows and not self._finalized:
                self.write_manifest()

    def _write_held(self) -> None:
        """Write the lines held so far (the hold goes on)."""
        for name, lines in (self._held or {}).items():
            data = b"".join(lines)
            _write_all(self._events if name == "events.jsonl" else self._steps, data)
            self._written[name] += len(data)
        if self._held:
            self._held = {}

    def event(self, kind: str, phase: str, payload: dict[str, Any] | None = None, *, step_id: int | None = None,
              ok: bool = True, error: str | None = None, ts: str | None = None) -> int:
        """Append one event; `ts` is when it happened when that was earlier than now (default: now)."""
        if self._finalized:
            return self._seq
        if kind == "model_retry" and payload and isinstance(payload.get("ts"), str):  # a model's retry says when
            ts, payload = ts or payload["ts"], {k: v for k, v in payload.items() if k != "ts"}
        self._seq += 1
        record = {
            "run_id": self.run_id, "seq": self._seq, "step_id": step_id, "phase": phase, "kind": kind,
            "ok": ok, "ts": ts if ts and _TS.fullmatch(ts) else utc_now(),
            "payload": payload or {}, "error": error or None,  # scrubbed with the line (`_append`)
        }
        self._append(self._events, "events.jsonl", record)
        self.manifest.event_count = self._seq
        return self._seq

    def step(self, record: dict[str, Any]) -> None:
        """Append one finished step and rewrite the manifest (the durability point of a step)."""
        self._append(self._steps, "steps.jsonl", record)
        if self.fsync == "always":
            os.fsync(self._events)
            os.fsync(self._steps)
        self.manifest.step_count += 1
        self.write_manifest()

    def integrity(self) -> tuple[bool, str]:
        """Are the three files present and do the JSONL files hold exactly the lines written (no re-read)?"""
        if not (self.run_dir / "manifest.json").exists():
            return False, "manifest.json missing"
        for name, expected in self._written.items():
            try:
                size = os.stat(self.run_dir / name).st_size
            except FileNotFoundError:
                return False, f"{name} missing"
            if size != expected:
                return False, f"{name} holds {size} bytes but {expected} were written"
        return True, f"{self._seq} events, {self.manifest.step_count} steps"

    # -- manifest --------------------------------------------------------------------------
    def update(self, **fields: Any) -> None:
        """Set manifest fields (validated by the Manifest model) without writing yet."""
        validate = Manifest.__pydantic_validator__.validate_assignment  # the fields given, not the whole manifest
        for key, value in fields.items():
            validate(self.manifest, key, self.redactor.scrub(value, key))

    def write_manifest(self) -> None:
        """Atomically rewrite manifest.json: write the temporary file, then swap names (see `swap.py`). Inside
        `held()`, once when it ends."""
        if self._held is not None:
            self._manifest_due = True
            return
        self._manifest_due = False
        self.manifest.updated_at = utc_now()
        # fields are redacted when set (update/finalize); the dump is scrubbed by value once more, its large
        # fields once per value (manifest_json.py)
        data = self._encoder.encode(self.manifest).encode("utf-8")
        # Both files stay open between rewrites (closed by `finalize`): after an exchange the temporary name holds
        # the other one, so a rewrite is a write, a cut and a rename, with no open or close.
        fd = self._tmp_fd if self._tmp_fd is not None else os.open(self._manifest_tmp, _OVERWRITE, 0o644)
        self._tmp_fd = None
        try:
            _write_all_at(fd, data)
            os.ftruncate(fd, len(data))
            if self.fsync == "always":
                os.fsync(fd)
            if self._manifest_written and exchange(self._manifest_tmp, self._manifest_path):
                self._tmp_holds_old = True
                self._tmp_fd, self._manifest_fd = self._manifest_fd, fd
            else:
                os.replace(self._manifest_tmp, self._manifest_path)
                self._tmp_holds_old = False
                self._close_manifest_fds()
                self._manifest_fd = fd
        except BaseException:
            os.close(fd)
            raise
        self._manifest_written = True
        if self.fsync == "group":
            FLUSHER.mark_files(self._durable_paths)

    _tmp_fd: int | None = None  # the file named `.manifest.json.<pid>.tmp`, when this writer has it open
    _manifest_fd: int | None = None  # the file named `manifest.json`, likewise

    def _close_manifest_fds(self) -> None:
        for fd in (self._tmp_fd, self._manifest_fd):
            if fd is not None:
                os.close(fd)
        self._tmp_fd = self._manifest_fd = None

    def __del__(self) -> None:  # a writer dropped unfinalized (a crash on the way) keeps no descriptor
        try:
            self._close_manifest_fds()
            if not getattr(self, "_finalized", True):  # finalize closed these; a failed __init__ set none
                for fd in (self._events, self._steps):
                    os.close(fd)
        except (OSError, AttributeError):
            pass

    def finalize(self, status: str, summary: RunSummary, checks: list[OfficialCheck] | None = None,
                 evaluation: dict[str, Any] | None = None) -> None:
        """Write the final manifest exactly once; later calls are ignored."""
        if self._finalized:
            return
        self._finalized = True
        self._write_held()
        self._held = None  # nothing is held for files that are closed now
        for fd in (self._events, self._steps):
            if self.fsync == "always":
                os.fsync(fd)
            os.close(fd)
        self.manifest.status = "running" if self.hold_status and status != "cancelled" else status  # type: ignore
        summary = RunSummary.model_validate(self.redactor.scrub(summary.model_dump(mode="json")))
        self.manifest.summary = summary
        self.manifest.token_usage = summary.token_usage
        self.manifest.latency_seconds = summary.latency_seconds
        self.manifest.cost = summary.cost
        if checks is not None:
            self.manifest.official_checks = checks
            self.manifest.official_run = all(c.passed for c in checks)
        if evaluation is not None:
            self.manifest.evaluation = evaluation
        self.write_manifest()
        spare = None
        if self.hold_status and self.manifest.status == "running":  # what `seal_trace` writes, without re-reading
            sealed = self.manifest.model_copy(update={"status": status})
            spare = self._manifest_tmp if self._tmp_holds_old else None  # it writes there (no new file)
            # a shallow copy: its large fields are the objects just encoded (manifest_json.py)
            _SEALED[str(self.run_dir)] = (self._encoder.encode(sealed).encode("utf-8"), spare)
        self._close_manifest_fds()
        if self._tmp_holds_old and spare is None:
            os.unlink(self._manifest_tmp)  # one freed inode per run instead of one per rewrite
            self._tmp_holds_old = False
        if self.fsync == "group" and self.sync_at_end:
            FLUSHER.sync()  # the end of a run is a durability point

    @property
    def finalized(self) -> bool:
        return self._finalized

    @property
    def schema_version(self) -> str:
        return SCHEMA_VERSION


# run dir -> its final manifest, for `seal_trace` (finalized with hold_status), and the writer's spare temporary
# file (holding the previous manifest) to write it into
_SEALED: dict[str, tuple[bytes, Path | None]] = {}


def seal_trace(run_dir: str | Path, status_of: Callable[[Any], str | None]) -> None:
    """Write the final status of a run finalized with `hold_status` (its result row is now durable): the one
    `finalize` was given when this process finalized it, else `status_of` the stop reason its summary records
    (None: leave it running). Not fsynced: lost in a crash, the trace reads as interrupted, which is all it
    claims before this."""
    path = Path(run_dir) / "manifest.json"
    tmp = path.with_name(".manifest.json.sealed.tmp")
    sealed = _SEALED.pop(str(run_dir), None)
    if sealed is not None:  # finalized by this process: the final manifest is ready
        data, spare = sealed
        _swap_in(path, spare or tmp, data)
        return
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        status = status_of((manifest.get("summary") or {}).get("stop_reason"))
    except (OSError, ValueError, AttributeError):
        return
    if manifest.get("status") != "running" or status is None:
        return
    manifest["status"] = status
    _swap_in(path, tmp, json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _swap_in(path: Path, tmp: Path, data: bytes) -> None:
    """Write `data` into `tmp` (the writer's spare file when it left one: no new file is created), then swap the
    names (`swap.exchange`) and remove the old manifest: one inode freed per run, where the writer's unlink and a
    rename over the manifest freed two. On a failure (e.g. a full disk) the trace keeps saying `running`
    (interrupted), never more than is true."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            _write_all_at(fd, data)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        if exchange(tmp, path):
            os.unlink(tmp)  # the old manifest, under the temporary name now
        else:
            os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)



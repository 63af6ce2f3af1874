"""TraceWriter: appends events and steps as they happen and keeps `manifest.json` current.

Durability rules (the trace contract): the manifest is rewritten atomically (temp file, then
rename) at start, after every step and at the end; every JSONL line is written whole and
flushed, so a SIGKILL leaves a valid manifest and whole lines. Disk flushes are group-committed
(see `durability.py`): within ~50 ms in the background, and synchronously when the run ends.
`fsync="always"` restores a flush per write. `finalize()` is idempotent and is called on every
exit path by the engine.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .durability import FLUSHER
from .redact import Redactor
from .schema import SCHEMA_VERSION, Manifest, OfficialCheck, RunSummary

_HOST = socket.gethostname()
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class TraceDirError(OSError):
    """The log directory cannot be created or written (a user-fixable problem)."""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


def _dumps(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)


class TraceWriter:
    def __init__(self, logdir: Path | str, run_id: str, redactor: Redactor | None = None,
                 fsync: bool | str = "group") -> None:
        self.logdir = ensure_writable_dir(Path(logdir))
        self.run_id = run_id
        self.run_dir = self.logdir / run_id
        self.run_dir.mkdir(parents=True, exist_ok=False)
        self.redactor = redactor or Redactor()
        # "group" (default): batched background flushes + a synchronous one at the end;
        # "always" (or True): flush every write; "never" (or False): leave it to the OS.
        self.fsync = {True: "always", False: "never"}.get(fsync, fsync)  # type: ignore[arg-type]
        self._events = open(self.run_dir / "events.jsonl", "a", encoding="utf-8")
        self._steps = open(self.run_dir / "steps.jsonl", "a", encoding="utf-8")
        now = utc_now()
        self.manifest = Manifest(
            run_id=run_id,
            created_at=now,
            updated_at=now,
            writer={"pid": os.getpid(), "host": _HOST},
        )
        self._seq = 0
        self._finalized = False
        # the first manifest is written by the caller once it has filled in the run's identity


    # -- appends ---------------------------------------------------------------------------
    def event(self, kind: str, phase: str, payload: dict[str, Any] | None = None, *, step_id: int | None = None,
              ok: bool = True, error: str | None = None) -> int:
        if self._finalized:
            return self._seq
        self._seq += 1
        record = {
            "run_id": self.run_id, "seq": self._seq, "step_id": step_id, "phase": phase, "kind": kind,
            "ok": ok, "ts": utc_now(), "payload": self.redactor.scrub(payload or {}),
            "error": self.redactor.scrub_text(error) if error else None,
        }
        self._events.write(_dumps(record) + "\n")
        self._events.flush()
        self.manifest.event_count = self._seq
        return self._seq

    def step(self, record: dict[str, Any]) -> None:
        """Append one finished step and rewrite the manifest (the durability point of a step)."""
        self._steps.write(_dumps(self.redactor.scrub(record)) + "\n")
        self._steps.flush()
        if self.fsync == "always":
            os.fsync(self._events.fileno())
            os.fsync(self._steps.fileno())
        self.manifest.step_count += 1
        self.write_manifest()

    # -- manifest --------------------------------------------------------------------------
    def update(self, **fields: Any) -> None:
        """Set manifest fields (validated by the Manifest model) without writing yet."""
        for key, value in fields.items():
            setattr(self.manifest, key, self.redactor.scrub(value, key))
        self.manifest = Manifest.model_validate(self.manifest.model_dump())

    def write_manifest(self) -> None:
        self.manifest.updated_at = utc_now()
        # fields are redacted when set (update/finalize), so each rewrite is a plain fast dump
        target = self.run_dir / "manifest.json"
        tmp = self.run_dir / f".manifest.json.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(self.manifest.model_dump_json())
            fh.flush()
            if self.fsync == "always":
                os.fsync(fh.fileno())
        os.replace(tmp, target)
        if self.fsync == "group":
            FLUSHER.mark_dirty(self.run_dir)

    def finalize(self, status: str, summary: RunSummary, checks: list[OfficialCheck] | None = None) -> None:
        """Write the final manifest exactly once; later calls are ignored."""
        if self._finalized:
            return
        self._finalized = True
        for fh in (self._events, self._steps):
            fh.flush()
            if self.fsync == "always":
                os.fsync(fh.fileno())
            fh.close()
        self.manifest.status = status  # type: ignore[assignment]
        summary = RunSummary.model_validate(self.redactor.scrub(summary.model_dump(mode="json")))
        self.manifest.summary = summary
        self.manifest.token_usage = summary.token_usage
        self.manifest.latency_seconds = summary.latency_seconds
        self.manifest.cost = summary.cost
        if checks is not None:
            self.manifest.official_checks = checks
            self.manifest.official_run = all(c.passed for c in checks)
        self.write_manifest()
        if self.fsync == "group":
            FLUSHER.sync()  # the end of a run is a durability point

    @property
    def finalized(self) -> bool:
        return self._finalized

    @property
    def schema_version(self) -> str:
        return SCHEMA_VERSION


def annotate_manifest(run_dir: Path | str, key: str, value: Any) -> None:
    """Add one new top-level field to a finished run's manifest (atomic rewrite).

    Used once per run, after a benchmark's evaluation, to record {success, score} so tools that
    read only manifests (the board) know the outcome. An existing field is never overwritten.
    """
    path = Path(run_dir) / "manifest.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get(key) is not None:  # the manifest schema lists the key with null until it is set
        return
    data[key] = value
    tmp = path.with_name(f".manifest.json.{os.getpid()}.annotate.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, path)
    FLUSHER.mark_dirty(path)

"""Read a run directory back, tolerating what a crash can leave behind.

A run killed mid-way keeps `status: running` in its manifest; the reader reports it as
`interrupted` when the writing process is gone (same host) or the manifest has not been
touched for a long time. A torn last JSONL line is skipped and reported, never fatal.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from .liveness import writer_alive
from .schema import Event, Manifest, StepRecord

STALE_AFTER_SECONDS = 6 * 3600


class TraceReadError(ValueError):
    """A run directory is missing or its manifest is unreadable."""


@dataclass
class JsonlIssue:
    file: str
    line: int
    message: str


@dataclass
class RunTrace:
    run_dir: Path
    manifest: Manifest
    events: list[Event] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    issues: list[JsonlIssue] = field(default_factory=list)

    @property
    def status(self) -> str:
        """Manifest status, or `interrupted` for a run whose writer died."""
        return effective_status(self.manifest)


def effective_status(manifest: Manifest) -> str:
    if manifest.status != "running":
        return manifest.status
    writer = manifest.writer or {}
    if writer.get("host") == socket.gethostname() and isinstance(writer.get("pid"), int):
        started = writer.get("started")
        alive = writer_alive(writer["pid"], started if isinstance(started, int) else None)
        return "running" if alive else "interrupted"
    try:
        updated = datetime.fromisoformat(manifest.updated_at.replace("Z", "+00:00"))
    except ValueError:
        return "interrupted"
    age = (datetime.now(timezone.utc) - updated).total_seconds()
    return "interrupted" if age > STALE_AFTER_SECONDS else "running"


def iter_jsonl(path: Path, issues: list[JsonlIssue] | None = None) -> Iterator[dict[str, Any]]:
    """Yield each whole JSON object line; record a JsonlIssue for anything else."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                if issues is not None:
                    issues.append(JsonlIssue(path.name, number, f"not valid JSON ({exc.msg})"))
                continue
            if not isinstance(value, dict):
                if issues is not None:
                    issues.append(JsonlIssue(path.name, number, "not a JSON object"))
                continue
            yield value


def read_manifest(run_dir: Path | str) -> Manifest:
    path = Path(run_dir) / "manifest.json"
    try:
        return Manifest.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise TraceReadError(f"{path}: no manifest; is '{run_dir}' a QitOS run directory?") from exc
    except ValueError as exc:
        raise TraceReadError(f"{path}: manifest is not valid ({str(exc).splitlines()[0]})") from exc


def read_steps(run_dir: Path | str, issues: list[JsonlIssue] | None = None) -> list[StepRecord]:
    return [StepRecord.model_validate(r) for r in iter_jsonl(Path(run_dir) / "steps.jsonl", issues)]


def read_events(run_dir: Path | str, issues: list[JsonlIssue] | None = None) -> list[Event]:
    return [Event.model_validate(r) for r in iter_jsonl(Path(run_dir) / "events.jsonl", issues)]


def load_run(run_dir: Path | str) -> RunTrace:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    issues: list[JsonlIssue] = []
    events = read_events(run_dir, issues)
    steps = read_steps(run_dir, issues)
    return RunTrace(run_dir, manifest, events, steps, issues)

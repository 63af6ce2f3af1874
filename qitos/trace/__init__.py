"""Trace files: schema, writer and reader."""

from .reader import RunTrace, TraceReadError, effective_status, load_run, read_manifest, read_steps, read_events
from .redact import Redactor
from .schema import SCHEMA_VERSION, Event, Manifest, OfficialCheck, RunSummary, StepRecord, TokenUsage
from .writer import TraceDirError, TraceWriter, ensure_writable_dir, new_run_id

__all__ = [
    "SCHEMA_VERSION", "Event", "Manifest", "OfficialCheck", "Redactor", "RunSummary", "RunTrace", "StepRecord",
    "TokenUsage", "TraceDirError", "TraceReadError", "TraceWriter", "effective_status", "ensure_writable_dir",
    "load_run", "new_run_id", "read_events", "read_manifest", "read_steps",
]

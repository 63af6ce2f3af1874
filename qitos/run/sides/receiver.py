"""The scoring side's end of a streamed trace: it writes the files, and decides what in them is trusted.

The agent side reports its own run: events, steps, its answer, and a description of itself (prompt
protocol, parser, tools, generation parameters; the model's identity comes from the run's configuration). Everything that says how the run is judged is the scoring side's:
the RunSpec's identity, benchmark and environment fields, the ExperimentSpec, the task summary, the
official checks and the evaluation. Manifest fields the agent side tries to set beyond its own
description are dropped and counted (`dropped_fields`). Event kinds the benchmark's scoring side writes
itself (`reserved`, the adapter's `scoring_event_kinds`: e.g. Tau-Bench's executed actions) are dropped
when the agent side streams them and counted (`dropped_events`), so the trace's record of them is the
scoring side's alone.

Streamed step assets (screenshots) are written under names this side makes: `assets/<sha256><ext>`, the
extension from what the bytes are (PNG, JPEG, GIF, WebP, else `.bin`), never a name, folder or type the
agent side sends; the step record is rewritten to those names. Per-file and per-run quotas
(`--asset-max-file`, `--asset-max-run`) end the task `asset_quota`.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Callable

from qitos.core.stop import is_disk_full
from qitos.spec.run_spec import ExperimentSpec, RunSpec
from qitos.trace.schema import OfficialCheck, RunSummary
from qitos.trace.writer import TraceWriter

from qitos.run.sides.agent import AGENT_SPEC_FIELDS
from qitos.run.sides.limits import AgentLimits

# manifest fields the agent side may set: how it describes itself
AGENT_MANIFEST_FIELDS = frozenset({"model_id", "model_family", "prompt_protocol", "parser_name", "prompt_hash",
                                   "tool_manifest", "tool_manifest_hash", "replay_mode"})
ASSETS_DIR = "assets"
# what an asset file can be named, by what its bytes are (never by the name or type the agent side sends)
_MAGIC = ((b"\x89PNG\r\n\x1a\n", ".png", "image/png"), (b"\xff\xd8\xff", ".jpg", "image/jpeg"),
          (b"GIF87a", ".gif", "image/gif"), (b"GIF89a", ".gif", "image/gif"))


def asset_kind(data: bytes) -> tuple[str, str]:
    """(extension, MIME type) of an asset's bytes: an image format the board shows, else `.bin`."""
    for magic, ext, mime in _MAGIC:
        if data.startswith(magic):
            return ext, mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp", "image/webp"
    return ".bin", "application/octet-stream"


class StreamError(Exception):
    """The agent side sent something the scoring side will not write (the job ends `error`)."""


class AssetQuotaExceeded(StreamError):
    """A streamed asset passed the per-file or per-run quota (the task ends `asset_quota`)."""


class TraceReceiver:
    """Applies one job's stream to its TraceWriter; `finish` writes the final manifest with trusted fields."""

    def __init__(self, writer: TraceWriter, spec_for: Callable[[dict[str, Any]], RunSpec],
                 experiment: ExperimentSpec | None, task_summary: dict[str, Any],
                 reserved: frozenset[str] = frozenset(), limits: AgentLimits | None = None) -> None:
        self.w, self.spec_for, self.experiment, self.task_summary = writer, spec_for, experiment, task_summary
        self.reserved = reserved  # event kinds only the scoring side writes
        self.dropped_events = 0
        self.limits = limits or AgentLimits()
        self.asset_bytes = 0  # written into this run's assets folder so far
        self.dropped_assets = 0  # asset references without shipped bytes, removed from their step
        self.spec: RunSpec | None = None
        self.model_requests = 0  # model_request events the agent side streamed
        self.model_responses = 0  # model_response events: requests its model answered
        self.dropped_fields: set[str] = set()
        self.final: tuple[str, RunSummary] | None = None

    def apply(self, op: dict[str, Any]) -> None:
        kind = op.get("op")
        try:
            if kind == "event":
                self._event(op)
            elif kind == "step":
                self._step(op)
            elif kind == "update":
                self._update(dict(op.get("fields") or {}))
            elif kind == "write_manifest":
                if self.spec is not None:
                    self.w.write_manifest()
            elif kind == "finalize":
                self.final = (str(op.get("status")), RunSummary.model_validate(op.get("summary") or {}))
            else:
                raise StreamError(f"unknown trace operation {kind!r}")
        except StreamError:
            raise
        except Exception as exc:  # noqa: BLE001 - a malformed record from the agent side
            if is_disk_full(exc):  # this side's write failed, not the agent's record: the job ends disk_full
                raise
            raise StreamError(f"the agent side sent a trace record that cannot be written ({kind}): "
                              f"{type(exc).__name__}: {exc}") from None

    def _event(self, op: dict[str, Any]) -> None:
        kind = str(op.get("kind"))
        if kind in self.reserved:
            self.dropped_events += 1
            return
        if kind == "model_request":
            self.model_requests += 1
        elif kind == "model_response":
            self.model_responses += 1
        payload = op.get("payload") if isinstance(op.get("payload"), dict) else {}
        if kind == "run_start" and self.spec is not None:  # the trusted fingerprint, not the agent side's own
            payload = {**payload, "run_spec_ref": self.spec.fingerprint()}
        self.w.event(kind, str(op.get("phase")), payload,
                     step_id=op.get("step_id") if isinstance(op.get("step_id"), int) else None,
                     ok=bool(op.get("ok", True)), error=str(op["error"]) if op.get("error") else None)

    def _step(self, op: dict[str, Any]) -> None:
        record = op.get("record")
        if not isinstance(record, dict):
            raise StreamError("a step record must be an object")
        shipped = op.get("assets") if isinstance(op.get("assets"), dict) else {}
        kept = []
        for asset in record.get("visual_assets") or []:
            content = shipped.get(asset.get("path")) if isinstance(asset, dict) else None
            if not isinstance(content, str):
                self.dropped_assets += 1
                continue
            path, mime = self._store(content)
            kept.append({"kind": str(asset.get("kind") or "screenshot")[:40], "path": path, "mime_type": mime})
        record["visual_assets"] = kept
        self.w.step(record)

    def _store(self, content: str) -> tuple[str, str]:
        """Write one asset as `assets/<sha256>.<ext>`: a name and folder of the scoring side's choosing, never the
        agent's (a name like `.git/config` or `agent_code/x.py` would plant files the scoring side later reads)."""
        limit = self.limits.asset_file_bytes
        if len(content) // 4 * 3 > limit + 3:  # refused before decoding: its base64 is already too long
            raise AssetQuotaExceeded(f"a streamed asset of about {len(content) // 4 * 3} bytes exceeds the per-file "
                                     f"quota of {limit} bytes (--asset-max-file)")
        data = base64.b64decode(content, validate=True)
        if len(data) > limit:
            raise AssetQuotaExceeded(f"a streamed asset of {len(data)} bytes exceeds the per-file quota of "
                                     f"{limit} bytes (--asset-max-file)")
        ext, mime = asset_kind(data)
        name = f"{ASSETS_DIR}/{hashlib.sha256(data).hexdigest()}{ext}"
        target = self.w.run_dir / name
        if target.exists():  # the same bytes again (an unchanged screen): one file, counted once
            return name, mime
        if self.asset_bytes + len(data) > self.limits.asset_run_bytes:
            raise AssetQuotaExceeded(f"streamed assets would pass the per-run quota of "
                                     f"{self.limits.asset_run_bytes} bytes (--asset-max-run)")
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(data)
        self.asset_bytes += len(data)
        return name, mime

    def _update(self, fields: dict[str, Any]) -> None:
        agent_spec = fields.pop("run_spec", None)
        allowed = {k: v for k, v in fields.items() if k in AGENT_MANIFEST_FIELDS}
        self.dropped_fields.update(k for k in fields if k not in AGENT_MANIFEST_FIELDS)
        if isinstance(agent_spec, dict) and self.spec is None:
            self.spec = self.spec_for({k: agent_spec.get(k) for k in AGENT_SPEC_FIELDS if k in agent_spec})
            allowed.update(
                run_spec=self.spec.record(),
                experiment_spec=self.experiment.model_dump(mode="json") if self.experiment else None,
                git_sha=self.spec.git_sha, package_version=self.spec.package_version, seed=self.spec.seed,
                benchmark_name=self.spec.benchmark_name, benchmark_split=self.spec.benchmark_split,
                task=self.task_summary, official_checks=[OfficialCheck(check="trace_complete", passed=False,
                                                                       detail="run in progress")],
            )
        if allowed:
            self.w.update(**allowed)

    def finish(self, status: str, summary: RunSummary, checks: list[OfficialCheck],
               evaluation: dict[str, Any] | None) -> None:
        if self.spec is None:  # the agent side never described itself: still a complete, honest trace
            self.spec = self.spec_for({})
            self.w.update(run_spec=self.spec.record(),
                          task=self.task_summary)
        self.w.finalize(status, summary, checks, evaluation)

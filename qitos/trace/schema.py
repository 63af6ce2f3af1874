"""The on-disk trace contract: what `manifest.json`, `events.jsonl` and `steps.jsonl` hold.

Records are pydantic models so the writer, the reader, the board and exports agree on one
shape. Unknown keys are kept (`extra="allow"`) so newer traces still load in older readers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "qitos.trace.v1"

RunStatus = Literal["running", "completed", "failed", "cancelled"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class TokenUsage(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0


class Event(_Record):
    run_id: str
    seq: int
    step_id: int | None = None
    phase: str
    kind: str
    ok: bool = True
    ts: str
    payload: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


class ToolInvocation(_Record):
    name: str
    arguments: Any = None
    status: Literal["ok", "error"] = "ok"
    latency_ms: float = 0.0
    error: str | None = None


class ParserInfo(_Record):
    name: str
    ok: bool
    diagnostics: list[str] = Field(default_factory=list)


class VisualAsset(_Record):
    kind: str = "screenshot"
    path: str
    mime_type: str = "image/png"


class StepRecord(_Record):
    step_id: int
    observation: Any = None
    model_input_hash: str | None = None
    model_response: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    action_results: list[Any] = Field(default_factory=list)
    tool_invocations: list[ToolInvocation] = Field(default_factory=list)
    parser: ParserInfo | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost: float | None = None
    latency_seconds: float = 0.0
    state_diff: dict[str, Any] | None = None
    visual_assets: list[VisualAsset] = Field(default_factory=list)


class RunSummary(_Record):
    stop_reason: str | None = None
    final_result: Any = None
    steps: int = 0
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    latency_seconds: float = 0.0
    cost: float | None = None
    failure_report: dict[str, Any] | None = None


class OfficialCheck(_Record):
    check: str
    passed: bool
    detail: str = ""


class Manifest(_Record):
    run_id: str
    schema_version: str = SCHEMA_VERSION
    status: RunStatus = "running"
    created_at: str
    updated_at: str
    step_count: int = 0
    event_count: int = 0
    summary: RunSummary = Field(default_factory=RunSummary)
    model_id: str | None = None
    model_family: str | None = None
    prompt_protocol: str | None = None
    parser_name: str | None = None
    prompt_hash: str | None = None
    tool_manifest: list[dict[str, Any]] = Field(default_factory=list)
    tool_manifest_hash: str | None = None
    seed: int | None = None
    git_sha: str | None = None
    package_version: str | None = None
    benchmark_name: str | None = None
    benchmark_split: str | None = None
    run_spec: dict[str, Any] | None = None
    experiment_spec: dict[str, Any] | None = None
    official_run: bool = False
    official_checks: list[OfficialCheck] = Field(default_factory=list)
    replay_mode: Literal["best_effort", "deterministic"] = "best_effort"
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    latency_seconds: float = 0.0
    cost: float | None = None
    task: dict[str, Any] = Field(default_factory=dict)
    writer: dict[str, Any] = Field(default_factory=dict)
    # benchmark outcome {success, score}, added once after evaluation (absent for non-benchmark runs)
    evaluation: dict[str, Any] | None = None

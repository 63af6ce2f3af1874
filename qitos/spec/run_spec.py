"""RunSpec and ExperimentSpec: the identity of a run and of a benchmark experiment.

Two runs with the same RunSpec fingerprint were configured identically; results rows carry
the fingerprint (`run_spec_ref`) so rows, traces and resume checks join on it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from qitos.trace.schema import SCHEMA_VERSION


# RunSpec fields that describe the agent itself (what it sends, how it parses, which tools); every other field is set
# by whoever runs it (in a benchmark run, the scoring side, from its own view)
AGENT_DESCRIPTION_FIELDS = ("model_name", "model_family", "model_provider", "base_url_host", "generation",
                            "prompt_protocol", "parser_name", "toolset_name", "tool_manifest")


class RunSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_name: str | None = None
    model_family: str | None = None
    model_provider: str | None = None
    base_url_host: str | None = None
    generation: dict[str, Any] = Field(default_factory=dict)
    # what parsers, scorers and the history sent back see of a reasoning model's reply (qitos.models.reasoning)
    reasoning_policy: str = "answer-only"
    # a server QitOS started for the run (qitos.run.model_server): its name, version and launch arguments
    model_server: dict[str, Any] | None = None
    prompt_protocol: str | None = None
    parser_name: str | None = None
    toolset_name: str | None = None
    tool_manifest: list[dict[str, Any]] | None = None
    environment: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    stop_criteria: dict[str, Any] = Field(default_factory=dict)
    budget: dict[str, Any] = Field(default_factory=dict)
    git_sha: str | None = None  # commit of the QitOS checkout (None for a regular package install)
    git_dirty: bool | None = None
    package_version: str | None = None
    agent_code: dict[str, Any] | None = None  # built-in recipe, or a --runner's file sha256 and repository state
    trace_schema_version: str = SCHEMA_VERSION
    benchmark_name: str | None = None
    benchmark_split: str | None = None
    benchmark_subset: str | None = None
    dataset_digest: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    # the fingerprint and the manifest's record once computed: a trace asks for them on every task. Setting a
    # field (or copying with `update`) forgets both; nothing in QitOS changes a RunSpec's nested dicts in place.
    _fingerprint: str | None = PrivateAttr(default=None)
    _record: dict[str, Any] | None = PrivateAttr(default=None)

    def fingerprint(self) -> str:
        """16 hex of sha256 over the canonical JSON of every field."""
        private = self.__pydantic_private__  # read directly: a private attribute's lookup is slow in pydantic
        if private.get("_fingerprint") is None:
            canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), default=str)
            private["_fingerprint"] = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        return private["_fingerprint"]

    def record(self) -> dict[str, Any]:
        """Every field as JSON data with the fingerprint: what a manifest's `run_spec` holds. Dumped once and
        carried by copies (a batch's tasks share their spec); each call returns a new outer dict."""
        private = self.__pydantic_private__
        if private.get("_record") is None:
            private["_record"] = {**self.model_dump(mode="json"), "fingerprint": self.fingerprint()}
        return dict(private["_record"])

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in ("_fingerprint", "_record"):
            self.__pydantic_private__["_fingerprint"] = None
            self.__pydantic_private__["_record"] = None
        super().__setattr__(name, value)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> "RunSpec":
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied.__pydantic_private__["_fingerprint"] = None
            copied.__pydantic_private__["_record"] = None
        return copied


class ExperimentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    benchmark_name: str
    benchmark_split: str | None = None
    benchmark_metadata: dict[str, Any] = Field(default_factory=dict)
    judge_config: dict[str, Any] | None = None
    run_defaults: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @staticmethod
    def default_name(benchmark: str, split: str | None, subset: str | None) -> str:
        return ":".join(p for p in (benchmark, split, subset) if p)


def spec_differences(old: dict[str, Any], new: dict[str, Any], limit: int = 6) -> list[str]:
    """`field old -> new` for the leaves where two RunSpecs (as JSON) differ, most telling first."""
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        elif a != b:
            show = lambda v: json.dumps(v, default=str)[:60]  # noqa: E731
            out.append(f"{path} {show(a)} -> {show(b)}")

    walk({k: v for k, v in old.items() if k != "fingerprint"}, {k: v for k, v in new.items() if k != "fingerprint"}, "")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])

"""What crosses the boundary between the agent side and the scoring side: plain data only.

An adapter describes the environment the agent acts on as an `AgentEnvSpec` (an importable factory
and JSON arguments, no gold); the agent side builds it with a `ScoringLink` through which it asks the
scoring side for what it must not hold itself (`adapter.serve`). The agent side returns an
`AgentOutcome`: the run's result and the environment's final state, which the scoring side scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from qitos.core.task import Task


class AgentCallRefused(Exception):
    """The scoring side refuses an agent-side call (unknown method, or not allowed by the benchmark's protocol)."""


class ScoringLink(Protocol):
    """The agent side's one way to ask the scoring side for something: JSON in, JSON out."""

    def call(self, method: str, payload: dict[str, Any] | None = None) -> Any: ...


class AgentEnvSpec(BaseModel):
    """How the agent side builds the environment it acts on.

    `factory` is "module:callable", called as `factory(workdir=Path, link=ScoringLink, **kwargs)` in the
    agent process and returning the agent side's `TaskRuntime` (its env and handles such as tools); `kwargs`
    are JSON. `files` maps a path relative to the agent's work dir to a host
    path the scoring side reads and ships (the agent side has no access to the host's files).
    """

    factory: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)


class AgentJob(BaseModel):
    """One task × trial as the agent side receives it: everything public, nothing that leads to gold."""

    model_config = {"protected_namespaces": ()}

    run_id: str
    task: Task
    trial: int = 0
    benchmark: str
    split: str | None = None
    subset: str | None = None
    variant: str | None = None
    recipe: str | None = None
    runner: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    model: dict[str, Any] = Field(default_factory=dict)  # ModelConfig fields; `proxied`: served by the scoring side
    proxied_model: dict[str, Any] | None = None  # name/family/provider/params of a model served by the scoring side
    env: AgentEnvSpec | None = None
    handles: dict[str, Any] = Field(default_factory=dict)  # public runtime handles (paths relative to the work dir)
    files: dict[str, str] = Field(default_factory=dict)  # relative path -> base64 content, written into the work dir
    parse_error_limit: int = 3
    tool_error_limit: int = 5
    seed: int | None = 0
    executor: str = "local"
    describe_only: bool = False  # build the agent, report its description, do not run
    limits: dict[str, Any] = Field(default_factory=dict)  # sides.limits.AgentLimits, and `rlimit_memory`
    model_relay: bool = False  # serve the runner's own OpenAI-compatible client on loopback (sides/relay.py)


class AgentOutcome(BaseModel):
    """What the agent side returns: the run's result (its own account) and the environment's final state."""

    stop_reason: str
    final_answer: str | None = None
    steps: int = 0
    error: str | None = None
    failure: dict[str, Any] | None = None
    final_state: Any = None
    description: dict[str, Any] | None = None  # the agent's RunSpec fields (model, protocol, parser, tools)
    closure: list[str] = Field(default_factory=list)  # module files the agent process imported


def safe_relative(path: str) -> Path:
    """A relative path that stays inside its root (no absolute paths, no `..`): the scoring side checks
    every path the agent side names before writing it."""
    rel = Path(path)
    if rel.is_absolute() or not rel.parts or any(p in ("..", "") for p in rel.parts):
        raise ValueError(f"path {path!r} leaves its directory")
    return rel

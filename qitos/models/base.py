"""The model contract every adapter implements: chat messages in, one typed response out."""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class Usage(BaseModel):
    """Token counts as the provider reports them. `reasoning_tokens` (completion_tokens_details) are part of
    `completion_tokens` in the OpenAI convention; `pricing.cost_of` also handles providers that count them apart."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ModelResponse(BaseModel):
    """One completion. `cost` is USD from the price table, 0 for local models, None when unknown.

    `text` is the answer without the reasoning: what parsers, scorers and the conversation history see
    (policy `qitos.models.reasoning.REASONING_POLICY`). `reasoning` is the model's reasoning, kept in full in
    traces: from the reply's `reasoning_content` / `reasoning` field, or split from a leading think block.
    """

    text: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
    latency_seconds: float = 0.0
    model: str = ""
    finish_reason: str | None = None
    attempt: int = 1
    raw: dict[str, Any] | None = None


# Called by adapters for every attempt (request, retry, response) so the trace can record it.
EventSink = Callable[[str, dict[str, Any]], None]


class ModelError(Exception):
    """The model could not answer after every retry (becomes stop reason `model_error`).

    `endpoint` says whose failure it was, as the client that called saw it: True when the endpoint (or the run's
    own settings: its key, its model name) failed -- 5xx, 429 or 408 after the retries, timeouts, connection
    errors, a reply that is no chat completion, 401/403/404; False when the endpoint refused the request itself
    (another 4xx: a context too long, a bad parameter); None when the client cannot tell. The benchmark's scoring
    side counts only True (and None from its own models) as a failure outside the agent (sides/evidence.py)."""

    def __init__(self, *args: object, endpoint: bool | None = None) -> None:
        super().__init__(*args)
        self.endpoint = endpoint


class ModelConfigError(ValueError):
    """A user mistake in model selection or configuration (unknown name, missing key variable, ...)."""


@runtime_checkable
class Model(Protocol):
    """What the engine needs from a model. `name`/`family`/`provider` feed the RunSpec."""

    name: str
    family: str
    provider: str
    params: dict[str, Any]

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: EventSink | None = None,
        **params: Any,
    ) -> ModelResponse: ...

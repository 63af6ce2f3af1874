"""The simulated user of a Tau-Bench episode (spec section 11.2).

Model-driven strategies (``llm`` default, ``react``, ``verify``, ``reflection``) keep upstream's
mirrored chat history: system prompt, the agent's greeting as a "user" message, then the
simulator's replies as "assistant" and the agent's utterances as "user". ``scripted`` replays a
list of replies then says ``###STOP###``; ``human`` reads replies from a console.

Deliberate differences from upstream: constructors make no model call (upstream resets once
in the constructor, react twice, which only costs money), and ``total_cost`` sums every call
(upstream reports the last call's cost only).

The model is duck-typed: ``model.complete(messages, **params)`` returning an object with
``.text``, ``.usage``, ``.cost``, ``.latency_seconds`` and ``.model`` (qitos.models.base).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from .data import STOP_TOKEN
from .errors import UserSimulatorError
from .user_prompts import (
    OPENING_LINE,
    llm_system_prompt,
    parse_react,
    react_system_prompt,
    reflection_prompt,
    reflection_response,
    verify_prompt,
)

Emit = Callable[[str, dict[str, Any]], None]
Message = dict[str, Any]
USER_STRATEGIES = ("llm", "react", "verify", "reflection", "scripted", "human")


@runtime_checkable
class UserSimulator(Protocol):
    strategy: str

    def reset(self, instruction: str) -> str:
        """Start a conversation for this task instruction; returns the user's first message."""
        ...

    def step(self, content: str) -> str:
        """The user's reply to the agent's message `content`."""
        ...

    @property
    def total_cost(self) -> float | None: ...


class LLMUser:
    """Strategy ``llm``: each reply is the model's raw answer to the mirrored history."""

    strategy = "llm"

    def __init__(self, model: Any, *, emit: Emit | None = None, **params: Any) -> None:
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"the user simulator needs a model with a complete() method, got {type(model).__name__}")
        self.model = model
        self.params = params
        self.emit = emit
        self.history: list[Message] = []
        self.calls = 0
        self._cost: float | None = None

    @property
    def total_cost(self) -> float | None:
        """Sum of the reported costs of every model call (None if no call reported one)."""
        return self._cost

    def system_prompt(self, instruction: str | None) -> str:
        return llm_system_prompt(instruction)

    def reset(self, instruction: str) -> str:
        self.history = [
            {"role": "system", "content": self.system_prompt(instruction)},
            {"role": "user", "content": OPENING_LINE},
        ]
        return self.generate()

    def step(self, content: str) -> str:
        self.history.append({"role": "user", "content": content})
        return self.generate()

    def generate(self) -> str:
        text = self.complete(self.history, "reply")
        self.history.append({"role": "assistant", "content": text})
        return text

    def complete(self, messages: Sequence[Message], purpose: str) -> str:
        """One model call, traced through `emit`; returns the reply text."""
        started = time.perf_counter()
        response = self.model.complete([dict(message) for message in messages], **self.params)
        self.calls += 1
        cost = getattr(response, "cost", None)
        if cost is not None:
            self._cost = (self._cost or 0.0) + cost
        text = getattr(response, "text", None)
        if self.emit is not None:
            latency = getattr(response, "latency_seconds", None)
            self.emit(
                "user_model_call",
                {
                    "strategy": self.strategy,
                    "purpose": purpose,
                    "message_count": len(messages),
                    "text": text,
                    "usage": _usage_dict(getattr(response, "usage", None)),
                    "cost": cost,
                    "latency_seconds": latency if latency is not None else time.perf_counter() - started,
                    "model": getattr(response, "model", None),
                },
            )
        if not isinstance(text, str):
            raise UserSimulatorError(f"user simulator model returned no text (purpose: {purpose})")
        return text


class ReactUser(LLMUser):
    """Strategy ``react``: the model writes a Thought and a User Response; the history keeps both."""

    strategy = "react"

    def system_prompt(self, instruction: str | None) -> str:
        return react_system_prompt(instruction)

    def generate(self) -> str:
        raw = self.complete(self.history, "reply")
        self.history.append({"role": "assistant", "content": raw})
        try:
            return parse_react(raw)
        except ValueError as exc:
            raise UserSimulatorError(str(exc)) from None


class VerifyUser(LLMUser):
    """Strategy ``verify``: up to 3 drafts, each checked by a supervisor call (true/false)."""

    strategy = "verify"
    max_attempts = 3

    def judge(self, candidate: str) -> bool:
        answer = self.complete([{"role": "user", "content": verify_prompt(self.history, candidate)}], "verify")
        return "true" in answer.lower()

    def generate(self) -> str:
        text = ""
        for _ in range(self.max_attempts):
            text = self.complete(self.history, "reply")
            if self.judge(text):
                self.history.append({"role": "assistant", "content": text})
                return text
        return text  # upstream: the last rejected draft is returned but not added to the history


class ReflectionUser(VerifyUser):
    """Strategy ``reflection``: a rejected draft gets one reflected retry (2 attempts at most)."""

    strategy = "reflection"

    def generate(self) -> str:
        first = self.complete(self.history, "reply")
        self.history.append({"role": "assistant", "content": first})
        if self.judge(first):
            return first
        advice = self.complete([{"role": "user", "content": reflection_prompt(self.history, first)}], "reflection")
        private = self.history + [{"role": "user", "content": reflection_response(advice)}]
        second = self.complete(private, "reply")
        self.history.append({"role": "assistant", "content": second})
        return second if self.judge(second) else first


class ScriptedUser:
    """Strategy ``scripted``: the first reply opens, each respond gets the next; then ``###STOP###``."""

    strategy = "scripted"
    total_cost: float | None = 0.0

    def __init__(self, replies: Sequence[str] = ()) -> None:
        if isinstance(replies, str) or not all(isinstance(reply, str) for reply in replies):
            raise TypeError("ScriptedUser needs a list of reply strings")
        self.replies = list(replies)
        self.instruction: str | None = None
        self.received: list[str] = []
        self._next = 0

    def reset(self, instruction: str) -> str:
        self.instruction = instruction
        self.received = []
        self._next = 0
        return self._pop()

    def step(self, content: str) -> str:
        self.received.append(content)
        return self._pop()

    def _pop(self) -> str:
        if self._next >= len(self.replies):
            return STOP_TOKEN
        self._next += 1
        return self.replies[self._next - 1]


class HumanUser:
    """Strategy ``human``: a person types the user's replies (stdin by default)."""

    strategy = "human"
    total_cost: float | None = 0.0

    def __init__(self, input_fn: Callable[[str], str] = input, output_fn: Callable[[str], None] = print) -> None:
        self.input_fn = input_fn
        self.output_fn = output_fn

    def reset(self, instruction: str) -> str:
        self.output_fn(f"Instruction: {instruction}\n(type {STOP_TOKEN} when the goal is reached)")
        return self.input_fn("User: ")

    def step(self, content: str) -> str:
        self.output_fn(f"Agent: {content}")
        return self.input_fn("User: ")


_MODEL_STRATEGIES: dict[str, type[LLMUser]] = {
    "llm": LLMUser,
    "react": ReactUser,
    "verify": VerifyUser,
    "reflection": ReflectionUser,
}


def make_user(
    strategy: str = "llm",
    model: Any = None,
    *,
    replies: Sequence[str] | None = None,
    emit: Emit | None = None,
    **params: Any,
) -> UserSimulator:
    """Build a user simulator by strategy name; `params` go to every model call (e.g. temperature)."""
    if strategy in _MODEL_STRATEGIES:
        if model is None:
            raise ValueError(f"user strategy {strategy!r} needs a model")
        return _MODEL_STRATEGIES[strategy](model, emit=emit, **params)
    if strategy == "scripted":
        return ScriptedUser(replies or ())
    if strategy == "human":
        return HumanUser()
    raise ValueError(f"Unknown user strategy: {strategy!r} (expected one of: {', '.join(USER_STRATEGIES)})")


def _usage_dict(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    if hasattr(usage, "model_dump"):
        return usage.model_dump()
    if isinstance(usage, dict):
        return dict(usage)
    keys = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")
    return {key: getattr(usage, key, None) for key in keys}

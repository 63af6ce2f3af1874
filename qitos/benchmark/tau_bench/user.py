"""Scoring side: the simulated user of a Tau-Bench episode: upstream's user simulators, call for call.

Model-driven strategies (``llm`` default, ``react``, ``verify``, ``reflection``) follow
``tau_bench/envs/user.py`` of the pinned commit: the same prompts (read from the data dir's
``upstream/`` by :mod:`.upstream`), the same mirrored history (system prompt, the agent's
greeting as a "user" message, the simulator's replies as "assistant", the agent's utterances as
"user"), the same judge and reflection calls and the same parsing. ``scripted`` replays a list of
replies then says ``###STOP###``; ``human`` reads replies from a console.

Sampling: upstream's user passes no temperature and no seed (the provider's defaults apply), so
each call sends ``temperature``/``seed`` only when ``--user-temperature``/``--user-seed`` set them
(a value of None means "not sent"; the agent's own sampling never leaks into the user's calls).

Deliberate differences, none of which changes a request or a reply: constructors make no model
call (upstream resets once in the constructor, react twice, and discards the replies), and
``total_cost`` sums every call (upstream reports the last call's cost only).

The model is duck-typed: ``model.complete(messages, **params)`` returning an object with
``.text``, ``.usage``, ``.cost``, ``.latency_seconds`` and ``.model`` (qitos.models.base).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from qitos.benchmark.tau_bench.data import STOP_TOKEN
from qitos.benchmark.tau_bench.errors import UserSimulatorError
from qitos.benchmark.tau_bench.upstream import UpstreamProtocol

Emit = Callable[[str, dict[str, Any]], None]
Message = dict[str, Any]
USER_STRATEGIES = ("llm", "react", "verify", "reflection", "scripted", "human")
# Parameters the user sends only when set (upstream sends none of them); max_tokens is never sent.
# temperature, seed, top_p, reasoning_effort, extra_body: sent only when --user-* sets them; request_timeout,
# max_retries: None is the model's own setting (the agent's flags when the user shares its model)
SAMPLING_KEYS = ("temperature", "seed", "top_p", "reasoning_effort", "extra_body", "request_timeout", "max_retries")


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


def litellm_message_text(content: str | None) -> str:
    """How upstream's verify() prints the draft: ``str()`` of litellm's reply ``Message``.

    Upstream formats the Message object itself into the judge prompt; litellm (1.x) renders a
    plain assistant reply with these fields, in this order.
    """
    return (f"Message(content={content!r}, role='assistant', tool_calls=None, function_call=None, "
            "provider_specific_fields=None)")


class LLMUser:
    """Strategy ``llm``: each reply is the model's raw answer to the mirrored history."""

    strategy = "llm"

    def __init__(self, model: Any, protocol: UpstreamProtocol, *, emit: Emit | None = None, **params: Any) -> None:
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"the user simulator needs a model with a complete() method, got {type(model).__name__}")
        unknown = sorted(set(params) - set(SAMPLING_KEYS))
        if unknown:
            raise TypeError(f"the user simulator takes only {', '.join(SAMPLING_KEYS)} as sampling, not {unknown}")
        self.model = model
        self.protocol = protocol
        # None = not sent (it also masks the agent model's own defaults when the user shares its model)
        self.params: dict[str, Any] = {"temperature": None, "seed": None, "max_tokens": None, "top_p": None,
                                       "reasoning_effort": None, "extra_body": None, **params}
        self.emit = emit
        self.history: list[Message] = []
        self.calls = 0
        self._cost: float | None = None

    @property
    def total_cost(self) -> float | None:
        """Sum of the reported costs of every model call (None if no call reported one)."""
        return self._cost

    def system_prompt(self, instruction: str | None) -> str:
        return self.protocol.user_system_prompt(self.strategy, instruction)

    def reset(self, instruction: str) -> str:
        self.history = [
            {"role": "system", "content": self.system_prompt(instruction)},
            {"role": "user", "content": self.protocol.opening_line},
        ]
        if self.emit is not None:  # the trace shows the prompt the user model was given
            self.emit("user_prompt", {"strategy": self.strategy, "messages": [dict(m) for m in self.history],
                                      "sampling": {k: v for k, v in self.params.items() if v is not None}})
        return self.generate(self.history)

    def step(self, content: str) -> str:
        self.history.append({"role": "user", "content": content})
        return self.generate(self.history)

    def generate(self, messages: list[Message]) -> str:
        """``generate_next_message``: the reply to `messages`, kept in the history."""
        text = self.complete(messages, "reply")
        self.history.append({"role": "assistant", "content": text})
        return text

    def complete(self, messages: Sequence[Message], purpose: str) -> Any:
        """One model call, traced through `emit`; returns the reply text (None when the reply had none)."""
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
        return text

    def judge(self, response: str, messages: list[Message]) -> bool:
        """Upstream's ``verify()``: a supervisor call over the transcript; "true" anywhere accepts."""
        prompt = self.protocol.verify_prompt(self.protocol.transcript(messages), response)
        answer = self.complete([{"role": "user", "content": prompt}], "verify")
        return "true" in _text(answer, "verify").lower()


class ReactUser(LLMUser):
    """Strategy ``react``: the model writes a Thought and a User Response; the history keeps both."""

    strategy = "react"

    def generate(self, messages: list[Message]) -> str:
        return parse_react(super().generate(messages))


class VerifyUser(LLMUser):
    """Strategy ``verify``: up to 3 drafts, each judged against the history without the draft."""

    strategy = "verify"
    max_attempts = 3

    def generate(self, messages: list[Message]) -> str:
        text = None
        for _ in range(self.max_attempts):
            text = self.complete(messages, "reply")
            # upstream formats the reply Message object itself into the judge's prompt
            if self.judge(litellm_message_text(text), messages):
                self.history.append({"role": "assistant", "content": text})
                return text
        return text  # upstream: the last rejected draft is said but not kept in the history


class ReflectionUser(LLMUser):
    """Strategy ``reflection``: a rejected draft gets one reflection and a second draft (2 attempts)."""

    strategy = "reflection"
    max_attempts = 2

    def generate(self, messages: list[Message]) -> str:
        private = list(messages)  # upstream's cur_messages: the history before this reply
        first = super().generate(private)  # kept in the history, as upstream's LLM user does
        if self.judge(first, private):
            return first
        for _ in range(1, self.max_attempts):
            prompt = self.protocol.reflect_prompt(self.protocol.transcript(private), first)
            advice = _text(self.complete([{"role": "user", "content": prompt}], "reflection"), "reflection")
            parts = advice.split("Response:")
            if len(parts) != 2:  # upstream unpacks exactly two parts, else raises
                raise UserSimulatorError(f"reflection reply has {len(parts) - 1} 'Response:' labels: {advice[:200]}")
            private.append({"role": "user", "content": parts[1].strip()})
            second = super().generate(private)
            if self.judge(second, private):
                return second
        return first


def parse_react(text: str | None) -> str:
    """What a react reply sends to the agent (``ReactUserSimulationEnv.parse_response``).

    Upstream's own parsing, kept: when "Thought:" is present everything after it is sent, the
    thought and the "User Response:" label included; a label present twice is an error.
    """
    text = _text(text, "reply")
    if STOP_TOKEN in text:
        return STOP_TOKEN
    for label in ("Thought:", "User Response:"):
        if label in text:
            parts = text.split(label)
            if len(parts) != 2:
                raise UserSimulatorError(f"Invalid response format: {text}")
            return parts[1].strip()
    raise UserSimulatorError(f"Invalid response format: {text}")


def _text(value: Any, purpose: str) -> str:
    if not isinstance(value, str):
        raise UserSimulatorError(f"user simulator model returned no text (purpose: {purpose})")
    return value


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
    protocol: UpstreamProtocol | None = None,
    replies: Sequence[str] | None = None,
    emit: Emit | None = None,
    **params: Any,
) -> UserSimulator:
    """Build a user simulator by strategy name; `params` (temperature, seed) go to every model call."""
    if strategy in _MODEL_STRATEGIES:
        if model is None:
            raise ValueError(f"user strategy {strategy!r} needs a model")
        if protocol is None:
            raise ValueError(f"user strategy {strategy!r} needs upstream's protocol texts (load_upstream)")
        return _MODEL_STRATEGIES[strategy](model, protocol, emit=emit, **params)
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

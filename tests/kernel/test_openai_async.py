"""The forwarder's async client (`acomplete`, aiohttp) beside the SDK's (`complete`) on the same real server:
the same request on the wire, the same response, the same retries, and the same error for every failure."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from qitos.models.base import ModelError
from qitos.models.openai_compat import OpenAICompatModel
from tests.support.openai_server import TEST_KEY, Fail, Hang, Raw, Reply, refused_port

TRANSPORT_HEADERS = {"connection", "content-length", "host"}  # each HTTP library's own framing


def model(base_url, key, **kw):
    return OpenAICompatModel("test-priced-model", base_url=base_url, api_key_env=key, backoff_seconds=0.01,
                             max_backoff_seconds=0.05, **kw)


def acomplete(m, *args, **kw):
    """`m.acomplete` on a loop of its own thread (as the hub's is; this thread may run a loop already)."""
    async def run():
        try:
            return await m.acomplete(*args, **kw)
        finally:
            await m._async_sender()._open().close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def outcome(call):
    """What a call ended with: the response's fields, or the error's type, message and whose failure it is."""
    try:
        response = call()
    except ModelError as exc:
        return ("error", type(exc).__name__, str(exc), exc.endpoint)
    return ("response", same_fields(response))


def same_fields(response):
    """A response without what differs from one reply to the next (its latency, the completion's id and time)."""
    fields = response.model_dump(exclude={"latency_seconds"})
    fields["raw"] = {k: v for k, v in fields["raw"].items() if k not in ("id", "created")}
    return fields


def test_the_same_request_and_response(server, key):
    m = model(server.base_url, key)
    assert m.async_ready()
    messages = [{"role": "user", "content": "héllo"}]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    for _ in range(2):
        server.queue.append(Reply(tool_calls=[{"name": "lookup", "arguments": {"key": "k"}, "id": "call_1"}], cached_tokens=3,
                                  message_extra={"reasoning_content": "thinking"}))
    sync = m.complete(messages, tools, seed=7)
    forwarded = acomplete(m, messages, tools, seed=7)
    assert same_fields(forwarded) == same_fields(sync)
    first, second = server.requests
    assert second["body"] == first["body"]
    drop = lambda h: {k: v for k, v in h.items() if k not in TRANSPORT_HEADERS}  # noqa: E731
    assert drop(second["headers"]) == drop(first["headers"])
    assert second["headers"]["authorization"] == f"Bearer {TEST_KEY}"


@pytest.mark.parametrize("answers", [
    [Fail(500)], [Fail(429)], [Fail(401)], [Fail(403)], [Fail(404)], [Fail(400, message="context too long")],
    [Fail(422)], [Raw('{"choices": []}', content_type="application/json")], [Raw("<html>welcome</html>")],
    [Fail(429, {"Retry-After": "0"}), Reply(text="ok")], [Fail(503), Fail(502), Reply(text="third")]],
    ids=lambda a: "+".join(type(x).__name__ + str(getattr(x, "status", "")) for x in a))
def test_the_same_outcome_and_retries(server, key, answers):
    m = model(server.base_url, key, max_retries=2)
    call = ([{"role": "user", "content": "x"}],)
    seen = []
    for complete in (m.complete, lambda *a, **kw: acomplete(m, *a, **kw)):
        server.queue.extend(answers)
        server.default = lambda body, last=answers[-1]: last
        before, statuses = len(server.requests), []
        result = outcome(lambda: complete(*call, on_event=lambda kind, data: statuses.append(data["status_code"])))
        seen.append((result, statuses, len(server.requests) - before))
        server.queue.clear()
    assert seen[1] == seen[0]


def test_a_timeout_and_a_refused_connection_read_the_same(server, key):
    m = model(server.base_url, key, max_retries=0, request_timeout=0.3)
    server.default = lambda body: Hang(2.0)
    call = ([{"role": "user", "content": "x"}],)
    timed_out = [outcome(lambda: m.complete(*call)), outcome(lambda: acomplete(m, *call))]
    assert timed_out[1] == timed_out[0] and "timed out" in timed_out[0][2]
    closed = model(f"http://127.0.0.1:{refused_port()}/v1", key, max_retries=0)
    refused = [outcome(lambda: closed.complete(*call)), outcome(lambda: acomplete(closed, *call))]
    assert refused[1] == refused[0] and "Connection error" in refused[0][2]


def test_a_request_the_sdk_cannot_encode_fails_the_same(server, key):
    m = model(server.base_url, key, max_retries=0)
    call = ([{"role": "user", "content": "x"}],)
    both = [outcome(lambda: m.complete(*call, temperature=float("nan"))),
            outcome(lambda: acomplete(m, *call, temperature=float("nan")))]
    assert both[1] == both[0] and both[0][0] == "error"
    assert not server.requests


def test_a_proxy_in_the_environment_or_credentials_in_the_url_keep_the_sdk_client(server, key, monkeypatch):
    assert not model(server.base_url.replace("http://", "http://user:pw@"), key).async_ready()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert not model(server.base_url, key).async_ready()

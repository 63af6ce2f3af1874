"""A real OpenAI-compatible chat server on loopback for tests and benchmarks.

Responses come from a queue of scripted behaviours: a reply (text and/or tool calls), an
HTTP error (status, headers), a body that is no completion (`Raw`) or no reply for a while (`Hang`);
`fault(kind)` names the faulty endpoints the fault-injection tests use. With an empty queue the server answers with `default` (a
callable of the request body). Every request (body and headers) is recorded.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class Reply:
    text: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{name, arguments(str|dict), id?}]
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0
    model: str | None = None
    message_extra: dict[str, Any] = field(default_factory=dict)  # e.g. reasoning_content (vLLM, SGLang, DeepSeek)
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens
    total_tokens: int | None = None  # default prompt + completion


@dataclass
class Fail:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "scripted failure"


@dataclass
class Raw:
    """A reply that is not a chat completion: any status, body and content type."""

    body: str
    status: int = 200
    content_type: str = "text/html"


@dataclass
class Hang:
    """No reply for `seconds` (a client timing out first sees a timeout), then `then` (default: a 504)."""

    seconds: float
    then: "Reply | Fail | Raw | None" = None


TEST_KEY = "sk-canary-0123456789abcdef"  # an API key for tests: a canary that no trace or file may hold

FAULTS = ("500", "timeout", "cut_json", "empty_choices", "hang")


def fault(kind: str) -> "Fail | Raw | Hang":
    """A faulty endpoint's answer: `500` (a server error), `timeout` (30 s with no reply: a client with a shorter
    request timeout gives up), `cut_json` (a 200 whose JSON body is cut short), `empty_choices` (a completion with
    no choices), `hang` (no reply for an hour)."""
    cut = '{"id": "chatcmpl-cut", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assi'
    return {"500": Fail(500, message="internal error"), "timeout": Hang(30.0),
            "cut_json": Raw(cut, content_type="application/json"),
            "empty_choices": Raw('{"id": "chatcmpl-empty", "object": "chat.completion", "choices": []}',
                                 content_type="application/json"),
            "hang": Hang(3600.0)}[kind]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_HELD: list[socket.socket] = []  # `refused_port`'s sockets, open until the test process ends


def refused_port() -> int:
    """A loopback port that refuses connections: bound, never listening, and held, so no other test's server can take
    it meanwhile (a port `free_port` found free can be taken by a test running beside this one)."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    _HELD.append(held)
    return held.getsockname()[1]


def completion_body(reply: Reply, model: str) -> dict[str, Any]:
    import json

    calls = [
        {"id": c.get("id") or f"call_{uuid.uuid4().hex[:8]}", "type": "function",
         "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])}}
        for c in reply.tool_calls
    ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
        "model": reply.model or model,
        "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                     "message": {"role": "assistant", "content": reply.text, "tool_calls": calls or None,
                                 **reply.message_extra}}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.total_tokens if reply.total_tokens is not None
                  else reply.prompt_tokens + reply.completion_tokens,
                  "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
                  **({"completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens}}
                     if reply.reasoning_tokens is not None else {})},
    }


class OpenAIServer:
    def __init__(self, default: Callable[[dict[str, Any]], Reply] | None = None, latency_seconds: float = 0.0) -> None:
        self.queue: deque[Reply | Fail | Raw | Hang] = deque()
        self.default = default or (lambda body: Reply(text="Final Answer: ok"))
        self.latency_seconds = latency_seconds
        self.requests: list[dict[str, Any]] = []
        # bound here, listened on by uvicorn: a port picked and bound later could be taken in between by a server
        # of a test running beside this one
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error",
                                                     access_log=False, lifespan="off",
                                                     timeout_graceful_shutdown=1))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    async def _chat(self, request: Request):
        body = await request.json()
        self.requests.append({"body": body, "headers": dict(request.headers)})
        if self.latency_seconds:
            await asyncio.sleep(self.latency_seconds)
        item = self.queue.popleft() if self.queue else self.default(body)
        if isinstance(item, Hang):
            await asyncio.sleep(item.seconds)
            item = item.then or Fail(504, message="gateway timeout")
        if isinstance(item, Raw):
            return Response(item.body, status_code=item.status, media_type=item.content_type)
        if isinstance(item, Fail):
            return JSONResponse({"error": {"message": item.message, "type": "scripted"}}, status_code=item.status,
                                headers=item.headers)
        return JSONResponse(completion_body(item, body.get("model", "unknown")))

    def __enter__(self) -> "OpenAIServer":
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started:
            if time.time() > deadline:
                raise RuntimeError("test OpenAI server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)


def tool_workload(body: dict[str, Any]) -> Reply:
    """Two-call workload: ask for the `lookup` tool, then answer once a tool result is in the messages."""
    if any(m.get("role") == "tool" for m in body.get("messages", [])):
        return Reply(text="The answer is 42.", prompt_tokens=60, completion_tokens=8)
    return Reply(tool_calls=[{"name": "lookup", "arguments": {"key": "answer"}}], prompt_tokens=50, completion_tokens=12)


def main() -> None:
    """`python -m tests.support.openai_server --port P --latency S`: serve the tool workload until killed."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    server = OpenAIServer(default=tool_workload, latency_seconds=args.latency)
    server.port, server.base_url = args.port, f"http://127.0.0.1:{args.port}/v1"
    server._server.config.port = args.port
    server._server.run()


if __name__ == "__main__":
    main()

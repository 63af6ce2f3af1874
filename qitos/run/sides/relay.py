"""A `--runner`'s own OpenAI-compatible client, relayed: an endpoint on the agent's private loopback.

A runner may build its own client (`openai.OpenAI()`) instead of using QitOS's model. Its agent process
then gets `OPENAI_BASE_URL` pointing at this relay (`127.0.0.1:<port>/v1`, inside the agent host's network
namespace, which has no other way out) and `OPENAI_API_KEY` set to a token of this job; the real key stays on
the scoring side. Each `POST .../chat/completions` becomes one `model.http` call over the job's link: the
scoring side calls the endpoint with its own client, counts the call, answer, tokens and cost, and returns the
endpoint's reply, which is served back as is. One relay per agent process, so a fresh process per task
(`task` mode): in `batch` mode the tasks would share one environment, and the runner keeps the host's network.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from qitos.benchmark.contract import AgentCallRefused, ScoringLink

MAX_BODY_BYTES = 64 * 1024 * 1024


class ModelRelay:
    """Serves the job's model calls on 127.0.0.1 until `close`."""

    def __init__(self, link: ScoringLink) -> None:
        self.link, self.token = link, "qitos-relay-" + secrets.token_hex(16)
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                relay.handle(self)

            def log_message(self, *args: Any) -> None:  # quiet: the trace records the calls
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, name="qitos-model-relay", daemon=True)

    def start(self) -> "ModelRelay":
        self._thread.start()
        os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"] = self.base_url, self.token
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        try:
            size = int(request.headers.get("content-length") or 0)
        except ValueError:
            size = 0
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return _reply(request, 401, {"error": {"message": "not this job's relay token"}})
        if not request.path.rstrip("/").endswith("/chat/completions"):
            return _reply(request, 404, {"error": {"message": "the relay serves POST /v1/chat/completions only"}})
        if not 0 < size <= MAX_BODY_BYTES:
            return _reply(request, 400, {"error": {"message": f"a request needs a Content-Length of 1 to "
                                                              f"{MAX_BODY_BYTES} bytes"}})
        try:
            body = json.loads(request.rfile.read(size))
        except ValueError:
            return _reply(request, 400, {"error": {"message": "the request body is not JSON"}})
        try:
            answer = self.link.call("model.http", {"body": body})
        except (AgentCallRefused, ConnectionError) as exc:
            return _reply(request, 400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
        _reply(request, int(answer.get("status") or 502), answer.get("body"))


def _reply(request: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    data = (body if isinstance(body, str) else json.dumps(body)).encode("utf-8")
    request.send_response(status)
    request.send_header("content-type", "application/json")
    request.send_header("content-length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)

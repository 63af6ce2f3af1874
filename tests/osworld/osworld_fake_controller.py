"""A small stand-in for the OSWorld in-VM controller (stdlib http.server on 127.0.0.1, a free port).

It keeps a dict of VM files, records every request, and answers commands from a table, so the client and
the ControllerProvider can be tested end to end over real HTTP.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from PIL import Image


def png_bytes(color: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), color).save(buffer, "PNG")
    return buffer.getvalue()


class FakeController:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.command_output: Callable[[Any, bool], str] = lambda command, shell: ""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "FakeController":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def calls(self, path: str) -> list[Any]:
        return [body for _, p, body in self.requests if p == path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        controller = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, body: bytes | str | Any, content_type: str = "application/json") -> None:
                if not isinstance(body, (bytes, str)):
                    body = json.dumps(body)
                data = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                kind = self.headers.get("Content-Type", "")
                if kind.startswith("application/json"):
                    return json.loads(raw or b"null")
                if kind.startswith("application/x-www-form-urlencoded"):
                    return {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                if kind.startswith("multipart/form-data"):
                    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {kind}\r\n\r\n".encode() + raw)
                    return {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                            for part in message.iter_parts()}
                return raw

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                controller.requests.append(("GET", self.path, None))
                routes = {
                    "/screenshot": lambda: self._send(200, png_bytes(), "image/png"),
                    "/accessibility": lambda: self._send(200, {"AT": "<desktop-frame name='main'/>"}),
                    "/platform": lambda: self._send(200, "Linux", "text/plain"),
                    "/cursor_position": lambda: self._send(200, [10, 20]),
                    "/terminal": lambda: self._send(200, {"output": "54\n"}),
                }
                if self.path.startswith("/download/"):
                    name = self.path.split("/download/", 1)[1]
                    data = controller.files.get("/download/" + name)
                    self._send(200, data, "application/octet-stream") if data is not None else self._send(404, {"error": "gone"})
                    return
                routes.get(self.path, lambda: self._send(404, {"error": "no route"}))()

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self._body()
                controller.requests.append(("POST", self.path, body))
                if self.path in ("/execute", "/setup/execute"):
                    output = controller.command_output(body["command"], body.get("shell", False))
                    self._send(200, {"status": "success", "output": output, "error": "", "returncode": 0})
                elif self.path == "/file":
                    data = controller.files.get(body.get("file_path", ""))
                    self._send(200, data, "application/octet-stream") if data is not None else self._send(404, {"error": "not found"})
                elif self.path == "/setup/upload":
                    controller.files[body["file_path"].decode()] = body["file_data"]
                    self._send(200, "ok", "text/plain")
                elif self.path == "/screen_size":
                    self._send(200, {"width": 1920, "height": 1080})
                elif self.path == "/window_size":
                    self._send(200, {"width": 1920, "height": 1080} if body.get("app_class_name") == "vlc" else {"width": 800, "height": 600})
                elif self.path == "/wallpaper":
                    self._send(200, png_bytes((0, 0, 255)), "image/png")
                elif self.path == "/list_directory":
                    self._send(200, {"name": "d", "type": "directory", "children": [{"name": "a.jpg", "type": "file"}]})
                elif self.path == "/setup/fail":
                    self._send(500, {"status": "error", "message": "boom"})
                elif self.path.startswith("/setup/"):
                    self._send(200, "ok", "text/plain")
                else:
                    self._send(404, {"error": "no route"})

        return Handler

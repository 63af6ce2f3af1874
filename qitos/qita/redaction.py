"""Redact secret values from every text response of the board (pages, JSON, raw trace files).

Traces are redacted when written, but a trace written by an older version, copied from another
machine, or a key marked secret only now (`qita board --secret-env NAME`) would still show. So the
board scrubs what it sends too: text bodies are buffered, scrubbed with the secrets known at request
time, and sent with a corrected Content-Length. Images pass through untouched; any other body
(pages, JSON, trace files downloaded as attachments) is scrubbed when it is UTF-8 text.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qitos.trace.redact import Redactor

_PASS_THROUGH = (b"image/", b"font/", b"video/", b"audio/")


class RedactMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        redactor = Redactor() if scope["type"] == "http" and scope.get("method") != "HEAD" else None
        if redactor is None or not redactor.active:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def scrubbing_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                if not content_type.startswith(_PASS_THROUGH):
                    start = message
                    return
                await send(message)
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            try:
                body = redactor.scrub_text(body.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                pass  # binary: nothing a text secret could be spotted in reliably
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})

        await self.app(scope, receive, scrubbing_send)

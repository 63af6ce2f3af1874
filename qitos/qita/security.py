"""The board's guard: read-only methods, Host check, token, security headers, safe file paths.

- Only GET and HEAD exist: the board never changes anything.
- On loopback the Host header must name loopback, so a web page on another origin cannot
  read traces through DNS rebinding.
- With a token (required off loopback) every request carries it: `?token=`, an
  `X-Qita-Token` or `Authorization: Bearer` header, or the cookie set on the first visit.
- Every response forbids inline script and foreign origins (CSP): defence in depth behind
  Jinja's autoescaping of trace text.
"""

from __future__ import annotations

import hmac
import re
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Awaitable, Callable
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .config import BoardConfig

COOKIE = "qita_token"
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
FILE_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox"
RUN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")


def valid_run_name(name: str) -> bool:
    return bool(RUN_NAME.match(name)) and name not in (".", "..")


def safe_child(root: Path, relative: str) -> Path | None:
    """`root/relative` if it resolves to a regular file inside `root`, else None (traversal, links out)."""
    if not relative or "\x00" in relative or relative.startswith(("/", "\\")):
        return None
    base = root.resolve()
    try:
        target = (base / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if base not in target.parents or not target.is_file():
        return None
    return target


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class GuardMiddleware:
    def __init__(self, app: ASGIApp, config: BoardConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, "the board is read-only: only GET and HEAD are allowed", [(b"allow", b"GET, HEAD")])
            return
        allowed = self.config.allowed_hosts
        if allowed is not None and _host_name(headers.get("host", "")) not in allowed:
            await _plain(send, 421, "unexpected Host header; open the board through the address it printed")
            return
        set_cookie = False
        if self.config.token:
            presented, from_query = self._presented(scope, headers)
            if presented is None or not hmac.compare_digest(presented.encode(), self.config.token.encode()):
                await _plain(send, 401, "this board needs its access token: open the URL `qita board` printed "
                                        "(it ends in ?token=...), or send an X-Qita-Token header")
                return
            set_cookie = from_query
        await self.app(scope, receive, self._wrap_send(send, set_cookie))

    def _presented(self, scope: Scope, headers: dict[str, str]) -> tuple[str | None, bool]:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("token"):
            return query["token"][0], True
        if headers.get("x-qita-token"):
            return headers["x-qita-token"], False
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip(), False
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie header is just "no token"
            return None, False
        return (cookie[COOKIE].value if COOKIE in cookie else None), False

    def _wrap_send(self, send: Send, set_cookie: bool) -> Callable[[Message], Awaitable[None]]:
        token = self.config.token

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", CSP.encode()))
                headers += [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                            (b"x-frame-options", b"DENY")]
                if set_cookie and token:
                    headers.append((b"set-cookie", f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict".encode()))
                message = {**message, "headers": headers}
            await send(message)

        return wrapped


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
               (b"x-content-type-options", b"nosniff"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

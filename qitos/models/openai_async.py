"""The forwarder's HTTP client: POST /chat/completions on an asyncio loop with aiohttp.

Why not the SDK's own client here: on the scoring side, every model call of every task in flight goes through one
process, and the SDK's pure-Python HTTP stack (httpx, httpcore, h11) on a thread per call cost about a third of
that process's CPU, most of it in the interpreter lock's hand-offs between those threads (measured at zero model
latency, 16 in flight). aiohttp parses HTTP in C and waits for every endpoint on the hub's one loop.

What is sent and what comes back are the SDK's (`direct_sender` sends the same with the SDK's client): its
headers and key, its request encoding, its timeouts (each of connect, pool wait and read bounded by the call's
timeout, as httpx bounds each), and its exception types, built from what the endpoint answered
(`_make_status_error_from_response`), so retries, Retry-After and every message read the same. A proxy in the
environment (which the SDK's client would honour) or credentials in the base URL make `of` return None, and the
SDK's client sends instead.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import urllib.parse
import urllib.request
from typing import Any, Callable

MAX_CONNECTIONS = 1000  # the SDK's DEFAULT_CONNECTION_LIMITS
KEEPALIVE_SECONDS = 5.0  # its keep-alive expiry


_OPEN: list[tuple[Any, Any]] = []  # (loop, session) of every session opened in this process


def _close_sessions() -> None:
    """At exit, close the sessions whose loop still runs (the hub's daemon thread), so none is reported unclosed."""
    for loop, session in _OPEN:
        if loop.is_running() and not session.closed:
            try:
                asyncio.run_coroutine_threadsafe(session.close(), loop).result(timeout=2)
            except Exception:  # noqa: BLE001 - exiting anyway
                pass


class AsyncSender:
    """POSTs one model's chat completions from the loop it is used on (a session per loop: a forked worker
    process starts its own)."""

    def __init__(self, client: Any, url: str, headers: dict[str, str], timeout: float, ssl: Any) -> None:
        self._client, self.url, self.headers, self.default_timeout, self._ssl = client, url, headers, timeout, ssl
        self._session: Any = None
        self._loop: Any = None

    @classmethod
    def of(cls, client: Any, ssl_context: Callable[[], Any]) -> "AsyncSender | None":
        """For an `openai.OpenAI` client; None when aiohttp or a piece of the SDK is missing, a proxy is set, or the
        base URL carries credentials (which the SDK's client sends its own way). `ssl_context()`: the SDK's."""
        try:
            import aiohttp  # noqa: F401

            url = str(client._prepare_url("/chat/completions"))
            headers = {k: v for k, v in {**client.default_headers, **client.auth_headers}.items() if isinstance(v, str)}
            timeout = client.timeout
            client._make_status_error_from_response  # noqa: B018 - needed to build status errors
        except (ImportError, AttributeError):
            return None
        if not isinstance(timeout, (int, float)) or not isinstance(getattr(client, "api_key", None), str):
            return None
        if any(k in urllib.request.getproxies() for k in ("http", "https", "all")):
            return None  # the SDK's client honours it; this one would not in the same way
        if "@" in urllib.parse.urlsplit(url).netloc:
            return None
        ssl = ssl_context() if url.startswith("https:") else None
        return cls(client, url, {**headers, "Accept-Encoding": "gzip, deflate"}, float(timeout), ssl)

    def _open(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0, ssl=self._ssl,
                                             keepalive_timeout=KEEPALIVE_SECONDS)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True, trust_env=False)
            self._loop = loop
            if not _OPEN:
                atexit.register(_close_sessions)
            _OPEN.append((loop, self._session))
        return self._session

    async def post(self, request: dict[str, Any], timeout: float | None = None) -> str:
        """The reply's text; the SDK's `APIStatusError` (by status), `APITimeoutError` or `APIConnectionError`."""
        import aiohttp
        import openai
        from openai._utils._json import openapi_dumps  # the SDK's request encoding

        wait = self.default_timeout if timeout is None else timeout
        body = openapi_dumps(request)
        headers = {**self.headers, "X-Stainless-Retry-Count": "0", "X-Stainless-Read-Timeout": str(wait)}
        limits = aiohttp.ClientTimeout(total=None, connect=wait, sock_connect=wait, sock_read=wait)
        try:
            async with self._open().post(self.url, data=body, headers=headers, timeout=limits) as reply:
                content = await reply.read()
                status, reply_headers, charset = reply.status, list(reply.headers.items()), reply.charset
        except asyncio.TimeoutError as err:
            raise openai.APITimeoutError(request=self._request(body, headers)) from err
        except (aiohttp.ClientError, OSError) as err:
            raise openai.APIConnectionError(request=self._request(body, headers)) from err
        if status >= 400:
            raise self._status_error(status, reply_headers, content, self._request(body, headers))
        return content.decode(charset or "utf-8", errors="replace")

    def _http(self) -> Any:
        """The HTTP library of the SDK's client (httpx, or the fork the SDK uses), for its request and response
        types: the SDK's errors carry them."""
        base = next(c for c in type(self._client._client).__mro__ if c.__name__ == "Client")
        return importlib.import_module(base.__module__.split(".")[0])

    def _request(self, body: bytes, headers: dict[str, str]) -> Any:
        return self._http().Request("POST", self.url, headers=headers, content=body)

    def _status_error(self, status: int, headers: list[tuple[str, str]], content: bytes, request: Any) -> Exception:
        response = self._http().Response(status, headers=headers, content=content, request=request)
        return self._client._make_status_error_from_response(response)

"""Any OpenAI-compatible chat endpoint, through the `openai` SDK with a configurable base URL.

The API key is read from an environment variable at call time and never stored on the model
object's public fields or written anywhere; a password in the base URL (`http://user:pw@host/v1`)
is registered as a secret and left out of messages (`shown_url`). Retries (429, 5xx, timeouts,
connection errors) use exponential backoff with jitter, honour Retry-After, and each failed
attempt is reported to the trace as a `model_retry` event. An agent whose upstream treats a failed call as a
reply sets the call option `failure_reply` (with `max_retries` 0 for none): the failure then comes back as a
response whose `raw["failure"]` holds the status and body, instead of a `ModelError`.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
import time
from typing import Any, Callable
from urllib.parse import unquote, urlparse

from tenacity import RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from qitos.models.base import EventSink, ModelConfigError, ModelError, ModelResponse, ToolCall, Usage
from qitos.models.deadline import TimeLeftExceeded, time_left
from qitos.models.deadline import deadline as task_deadline
from qitos.models.generation import CLIENT_KEYS, DEFAULT_MAX_RETRIES, DEFAULT_REQUEST_TIMEOUT, check_generation
from qitos.models.pricing import cost_of
from qitos.models.reasoning import DEFAULT_TAGS, parse_think_tags, split_message
from qitos.trace.writer import utc_now

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_CLIENT_LOCK = threading.Lock()
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
_BEARER_AUTH: dict[str, Any] = {"security": {"bearer_auth": True}}  # as chat.completions.create sends it


class _BadReply(ValueError):
    """The endpoint answered 200 with something that is not a chat completion (not retried)."""

    def __init__(self, message: str, body: str = "") -> None:
        super().__init__(message)
        self.body = body


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    status = _status(exc)
    return status is not None and (status == 429 or status >= 500 or status == 408)


def _is_api_error(exc: BaseException) -> bool:
    """An HTTP status, connection or timeout error of the SDK (not a bug in QitOS)."""
    import openai

    return isinstance(exc, openai.APIError)


def _passed(at: float | None) -> bool:
    return at is not None and time.monotonic() >= at


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after")
    if value is None:
        ms = response.headers.get("retry-after-ms")
        return float(ms) / 1000 if ms else None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def shared_ssl_context():
    """One TLS context per process, made the way the SDK's HTTP client makes its own: loading the CA store
    takes tens of milliseconds (half a second on a loaded machine), once per client otherwise, and the agent
    side builds a client per task. Made once in the agent host, it is inherited by every task's child."""
    import importlib

    import openai

    client_class = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    http = importlib.import_module(client_class.__module__.split(".")[0])  # httpx, or the fork the SDK uses
    return http.create_ssl_context()


def direct_sender(client: Any) -> Callable[[dict[str, Any], float | None], str] | None:
    """POST /chat/completions through the SDK client's own HTTP client (its connection pool, proxies, TLS context and
    redirects), with the headers, body encoding and errors of the SDK's `post`, but not its per-request option
    models, header merging and URL building: about 40 % of a call's CPU here (a forwarded call is the scoring side's
    largest per-task cost). None when the client is not one this knows (an API key that is not a plain string, an
    SDK without these pieces): `post` then sends as before."""
    import importlib

    import openai

    try:
        from openai._utils._json import openapi_dumps  # the SDK's request encoding (allow_nan=False, as `post`)

        http = client._client
        url = client._prepare_url("/chat/completions")
        headers = {k: v for k, v in {**client.default_headers, **client.auth_headers}.items() if isinstance(v, str)}
        status_error = client._make_status_error_from_response
        default_timeout = client.timeout
        base = next(c for c in type(http).__mro__ if c.__name__ == "Client")
        transport = importlib.import_module(base.__module__.split(".")[0])  # httpx, or the fork the SDK uses
        timeouts, statuses = transport.TimeoutException, transport.HTTPStatusError
        send, build = http.send, http.build_request
    except (ImportError, AttributeError, StopIteration):
        return None
    if not isinstance(getattr(client, "api_key", None), str) or not isinstance(default_timeout, (int, float)):
        return None

    def post(request: dict[str, Any], timeout: float | None = None) -> str:
        wait = default_timeout if timeout is None else timeout
        http_request = build("POST", url, content=openapi_dumps(request), timeout=wait,
                             headers={**headers, "X-Stainless-Retry-Count": "0", "X-Stainless-Read-Timeout": str(wait)})
        try:
            response = send(http_request, stream=False)
        except timeouts as err:
            raise openai.APITimeoutError(request=http_request) from err
        except openai.OpenAIError:
            raise
        except Exception as err:  # noqa: BLE001 - as the SDK: any other failure to send is a connection error
            raise openai.APIConnectionError(request=http_request) from err
        try:
            response.raise_for_status()
        except statuses as err:
            raise status_error(err.response) from None
        return response.text

    return post


class OpenAICompatModel:
    family = "openai_compat"
    provider = "openai_compat"

    def __init__(self, name: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float | None = 0.0, max_tokens: int | None = None, seed: int | None = None,
                 top_p: float | None = None, reasoning_effort: str | None = None,
                 extra_body: dict[str, Any] | None = None, think_tags: str | None = None,
                 max_retries: int | None = None, backoff_seconds: float = 1.0, max_backoff_seconds: float = 60.0,
                 request_timeout: float | None = None, price_table: str | None = None) -> None:
        self.name = name
        # the SDK's own variable, honoured the same way; a bad value is blamed on it, not on --base-url
        from_env = not base_url and bool(os.environ.get("OPENAI_BASE_URL"))
        self.url_source = "the environment variable OPENAI_BASE_URL" if from_env else "--base-url"
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url and "/" in name:
            raise ModelConfigError(
                f"model '{name}' looks like a Hugging Face id and no endpoint is given: serve it (vLLM, SGLang, "
                "llama.cpp server) and pass --base-url http://127.0.0.1:8000/v1 or set OPENAI_BASE_URL")
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        parsed = urlparse(self.base_url)
        from qitos.trace.redact import mark_secret_env, redact_url_credentials, register_secret

        for secret in (parsed.password, unquote(parsed.password or "")):  # as given and as decoded
            register_secret(secret)  # also caught where a message quotes it outside the URL
        self.shown_url = redact_url_credentials(self.base_url)  # the base URL for messages
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ModelConfigError(f"{self.url_source} '{self.shown_url}' is not an http(s) URL, "
                                   "e.g. http://127.0.0.1:8000/v1")
        self.base_url_host = parsed.hostname
        self._port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.api_key_env = api_key_env
        mark_secret_env([api_key_env])  # redacted by value in every trace, whatever the variable's name
        if not os.environ.get(api_key_env) and parsed.hostname not in _LOOPBACK:
            raise ModelConfigError(
                f"environment variable {api_key_env} is not set; export your API key there "
                f"(or name another variable with --api-key-env) to use model '{name}' at {self.shown_url}")
        try:
            tags = parse_think_tags(think_tags, name)
        except ValueError as exc:
            raise ModelConfigError(str(exc)) from None
        check_generation(top_p=top_p, reasoning_effort=reasoning_effort, extra_body=extra_body,
                         max_retries=max_retries, request_timeout=request_timeout)
        self.max_retries = DEFAULT_MAX_RETRIES if max_retries is None else max_retries
        self.request_timeout = DEFAULT_REQUEST_TIMEOUT if request_timeout is None else request_timeout
        self.backoff, self.max_backoff = backoff_seconds, max_backoff_seconds
        # what each call sends (None: not sent), then how it is sent (CLIENT_KEYS: never in the request body);
        # all of it is the RunSpec's `generation`
        sent = (("temperature", temperature), ("max_tokens", max_tokens), ("seed", seed), ("top_p", top_p),
                ("reasoning_effort", reasoning_effort), ("extra_body", extra_body or None))
        self.params: dict[str, Any] = {k: v for k, v in sent if v is not None}
        self.params.update(request_timeout=self.request_timeout, max_retries=self.max_retries,
                           think_tags=list(tags) if tags else None)
        self.think_tags = tags
        self.price_table = price_table
        self._client = None

    def preflight(self, timeout: float = 3.0) -> None:
        """Fail fast with a clear message when nothing listens at the base URL; build the client once, up front."""
        try:
            socket.create_connection((self.base_url_host, self._port), timeout=timeout).close()
        except OSError as exc:
            raise ModelConfigError(
                f"cannot reach {self.shown_url} ({exc.strerror or exc}); start the server or fix "
                f"{self.url_source}") from None
        self._get_client()

    def _get_client(self):
        if self._client is not None:
            return self._client
        with _CLIENT_LOCK:  # one client (one connection pool) per model, even when many threads start at once
            return self._make_client()

    def _make_client(self):
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or "EMPTY",
                                         max_retries=0, timeout=self.request_timeout,
                                         http_client=openai.DefaultHttpxClient(verify=shared_ssl_context()))
        return self._client

    _direct_send: Any = None

    def _direct(self):
        """The SDK's own HTTP client, sent to without the SDK's per-request machinery (`direct_sender`); None when
        this SDK version lacks a piece it needs (then `post`)."""
        if self._direct_send is None:
            self._direct_send = direct_sender(self._get_client()) or False
        return self._direct_send or None

    def _create(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """POST /chat/completions through the SDK (auth, status errors) and return the provider's JSON as is.

        `chat.completions.create(**request)` first walks every message and tool through the SDK's TypedDict
        transform (typing introspection per field: about 1.6 ms a request here, more than the rest of a step),
        and its typed `ChatCompletion` would only be converted into our ModelResponse again. Our request is
        plain JSON already, so the SDK's documented `post` for raw endpoints sends it unchanged, and the body
        comes back as text for one `json.loads`.
        """
        send = self._direct()
        if send is not None:
            text = send(request, timeout)
        else:
            options = _BEARER_AUTH if timeout is None else {**_BEARER_AUTH, "timeout": timeout}
            text = self._get_client().post("/chat/completions", body=request, cast_to=str, options=options)
        return self._parse(text)

    def _parse(self, text: str) -> dict[str, Any]:
        """The provider's JSON reply, or `_BadReply` (not retried) for what is not a chat completion."""
        try:
            body = json.loads(text)
        except json.JSONDecodeError:
            raise _BadReply(f"the server did not answer with JSON ({text[:120]!r}); is {self.url_source} the "
                            "OpenAI-compatible API root (usually ending in /v1)?", text) from None
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
            raise _BadReply(f"the reply has no choices: {text[:300]}", text)
        return body

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 on_event: EventSink | None = None, **params: Any) -> ModelResponse:
        call = _Call(self, messages, tools, on_event, params)
        try:
            for attempt in call.retrying(Retrying):
                with attempt:
                    started = time.perf_counter()
                    raw = self._create(call.request, call.attempt_timeout())
                    return self._to_response(raw, time.perf_counter() - started, attempt.retry_state.attempt_number,
                                             call.tags)
        except Exception as exc:  # noqa: BLE001 - `failed` sorts it out: a failure reply, or a ModelError
            return call.failed(exc)
        raise ModelError("unreachable")  # pragma: no cover

    def async_ready(self) -> bool:
        """Whether `acomplete` can send this model's requests (`openai_async.AsyncSender`); when not, `complete`."""
        return self._async_sender() is not None

    _async_send: Any = None

    def _async_sender(self):
        if self._async_send is None:
            from qitos.models.openai_async import AsyncSender

            self._async_send = AsyncSender.of(self._get_client(), shared_ssl_context) or False
        return self._async_send or None

    async def acomplete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                        on_event: EventSink | None = None, **params: Any) -> ModelResponse:
        """`complete` on an asyncio loop (the scoring side's forwarder): the same request, retries, errors and
        response, sent by `AsyncSender` (check `async_ready` first)."""
        from tenacity import AsyncRetrying

        call, sender = _Call(self, messages, tools, on_event, params), self._async_sender()
        # The first attempt is sent before the retry loop is built: most calls need no other, and the loop cost
        # about a twentieth of the forwarder's CPU per call. A first failure is handed to the loop as its first
        # attempt's outcome, so retries, waits, events and the final error are what the loop alone gives.
        started = time.perf_counter()
        try:
            raw = self._parse(await sender.post(call.request, call.attempt_timeout()))
        except Exception as exc:  # noqa: BLE001 - decided by the retry loop below
            first: Exception | None = exc
        else:
            return self._to_response(raw, time.perf_counter() - started, 1, call.tags)
        try:
            async for attempt in call.retrying(AsyncRetrying):
                with attempt:
                    if first is not None:
                        failed, first = first, None
                        raise failed
                    started = time.perf_counter()
                    raw = self._parse(await sender.post(call.request, call.attempt_timeout()))
                    return self._to_response(raw, time.perf_counter() - started, attempt.retry_state.attempt_number,
                                             call.tags)
        except Exception as exc:  # noqa: BLE001 - as `complete`
            return call.failed(exc)
        raise ModelError("unreachable")  # pragma: no cover

    def _failure(self, exc: BaseException) -> ModelResponse:
        """A failed call as a response (call option `failure_reply`): no text, `finish_reason` "error", and in
        `raw["failure"]` the HTTP status (200 for a reply that is not a chat completion, None when no reply
        came), the reply's body as text, and the error."""
        response = getattr(exc, "response", None)
        status = 200 if isinstance(exc, _BadReply) else _status(exc)
        body = exc.body if isinstance(exc, _BadReply) else getattr(response, "text", None) if status else None
        failure = {"status_code": status, "body": body, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        return ModelResponse(model=self.name, finish_reason="error", raw={"failure": failure},
                             cost=cost_of(self.name, Usage(), self.price_table))  # nothing billed: 0 where priced

    def _to_response(self, raw: dict[str, Any], latency: float, attempt: int,
                     tags: tuple[str, str] | None = DEFAULT_TAGS) -> ModelResponse:
        choice = raw["choices"][0] if isinstance(raw["choices"][0], dict) else {}
        message = choice.get("message") or {}
        calls: list[ToolCall] = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            try:
                args = json.loads(arguments or "{}") if isinstance(arguments, str) else arguments
                if not isinstance(args, dict):
                    args = {"__raw__": arguments}
            except json.JSONDecodeError:
                args = {"__raw__": arguments}
            calls.append(ToolCall(id=call.get("id") or "", name=function.get("name") or "", arguments=args))
        u = raw.get("usage") or {}
        details = u.get("prompt_tokens_details") or {}
        completion_details = u.get("completion_tokens_details") or {}
        usage = Usage(
            prompt_tokens=u.get("prompt_tokens") or 0, completion_tokens=u.get("completion_tokens") or 0,
            total_tokens=u.get("total_tokens") or 0, cached_tokens=details.get("cached_tokens") or 0,
            reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
        )
        model_id = raw.get("model") or self.name
        reasoning, answer = split_message(message, tags)
        return ModelResponse(
            text=answer, reasoning=reasoning, tool_calls=calls, usage=usage, cost=cost_of(model_id, usage, self.price_table),
            latency_seconds=round(latency, 6), model=model_id, finish_reason=choice.get("finish_reason"),
            attempt=attempt, raw=raw,
        )


class _Call:
    """One `complete` call's request and policy: its retries (backoff, Retry-After, the task's deadline), how long
    each attempt may take, and what a final failure becomes. Shared by `complete` and `acomplete`."""

    def __init__(self, model: OpenAICompatModel, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 on_event: EventSink | None, params: dict[str, Any]) -> None:
        self.model, self.on_event = model, on_event
        # a parameter given as None is not sent (e.g. a simulated user that leaves sampling to the provider)
        merged = {**model.params, **params}
        # client settings: None is this model's default (a simulated user's call leaves them to the agent's flags)
        client = {k: merged.pop(k, None) for k in CLIENT_KEYS}
        self.max_retries = model.max_retries if client["max_retries"] is None else int(client["max_retries"])
        self.timeout = model.request_timeout if client["request_timeout"] is None else float(client["request_timeout"])
        self.tags = model.think_tags if client["think_tags"] is None else (tuple(client["think_tags"]) or None)
        self.failure_reply = bool(client["failure_reply"])
        extra_body = merged.pop("extra_body", None) or {}
        request = {k: v for k, v in {"model": model.name, "messages": messages, **merged}.items() if v is not None}
        if tools:
            request["tools"] = tools
        request.update(extra_body)  # verbatim, last: --extra-body may set any field of the request
        self.request = request
        self.backoff = wait_random_exponential(multiplier=model.backoff, max=model.max_backoff)
        self.where = f"model '{model.name}' at {model.shown_url}"
        self.ends_at = task_deadline()  # --task-timeout: each request gets at most the task's time left

    def retrying(self, kind: Any) -> Any:
        """A tenacity `Retrying` (or `AsyncRetrying`) with this call's policy."""
        return kind(stop=stop_after_attempt(self.max_retries + 1) | (lambda _: _passed(self.ends_at)), wait=self._wait,
                    retry=retry_if_exception(_retryable), before_sleep=self._before_sleep, reraise=False)

    def _wait(self, state: Any) -> float:
        exc = state.outcome.exception() if state.outcome else None
        delay = _retry_after(exc)
        delay = min(delay, self.model.max_backoff) if delay is not None else self.backoff(state)
        return delay if self.ends_at is None else max(0.0, min(delay, self.ends_at - time.monotonic()))

    def attempt_timeout(self) -> float:
        left = time_left(self.where)
        return self.timeout if left is None else min(self.timeout, left)

    def _before_sleep(self, state: Any) -> None:
        exc = state.outcome.exception()
        if self.on_event:  # `ts`: this attempt's failure, kept when the events are written after the call
            self.on_event("model_retry", {"ts": utc_now(), "attempt": state.attempt_number, "status_code": _status(exc),
                                          "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                                          "wait_seconds": round(state.next_action.sleep, 3)})

    def failed(self, exc: Exception) -> ModelResponse:
        """What ended the call's attempts: a response (call option `failure_reply`), or raised as a `ModelError`."""
        model, where = self.model, self.where
        if isinstance(exc, TimeLeftExceeded):
            raise exc
        if isinstance(exc, RetryError):
            if _passed(self.ends_at):
                time_left(where)  # raises TimeLeftExceeded: the task's time, not the retries, ran out
            last = exc.last_attempt.exception()
            if self.failure_reply:
                return model._failure(last)
            raise ModelError(f"{where} failed after {self.max_retries + 1} attempts: "
                             f"{type(last).__name__}: {str(last)[:300]}", endpoint=_retryable(last)) from None
        if isinstance(exc, _BadReply):
            if self.failure_reply:
                return model._failure(exc)
            raise ModelError(f"{where}: {exc}", endpoint=True) from None
        if self.failure_reply and _is_api_error(exc):
            return model._failure(exc)
        if _status(exc) in (401, 403):
            raise ModelError(f"{where} refused the API key from {model.api_key_env} ({_status(exc)}); check the key",
                             endpoint=True) from None
        if _status(exc) == 404:
            raise ModelError(f"model '{model.name}' not found at {model.shown_url} (404); check --model-name",
                             endpoint=True) from None
        raise ModelError(f"{where}: {type(exc).__name__}: {str(exc)[:300]}",
                         endpoint=True if _retryable(exc) else False) from None

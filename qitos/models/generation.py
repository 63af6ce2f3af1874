"""Generation controls beyond temperature and max_tokens, checked once where the flags come in.

Sent with each request: `top_p`, `reasoning_effort`, and `extra_body` (a JSON object merged verbatim
into the request body, for server-specific fields such as vLLM's
`chat_template_kwargs: {"enable_thinking": false}`, `top_k`, `min_p`, `repetition_penalty`).
Client settings (CLIENT_KEYS) say how a request is sent and read, and are never part of its body:
`request_timeout`, `max_retries`, `think_tags`, and `failure_reply` (a call option only an agent sets: a call that
fails, after its retries, returns a response describing the failure instead of raising; for an agent whose
upstream treats a failed call as a reply). All of them are the RunSpec's `generation`, so they are in its
fingerprint, and `qit bench eval` and the board tell configurations apart by them.
"""

from __future__ import annotations

import json
from typing import Any

from qitos.models.base import ModelConfigError

CLIENT_KEYS = ("request_timeout", "max_retries", "think_tags", "failure_reply")
SENT_KEYS = ("temperature", "max_tokens", "seed", "top_p", "reasoning_effort")  # request fields with their own flag
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 5
REASONING_EFFORTS = ("minimal", "low", "medium", "high")


def parse_extra_body(value: str | dict[str, Any] | None, flag: str = "--extra-body") -> dict[str, Any] | None:
    """`--extra-body '{"top_k": 20}'` → a dict; bad JSON or a non-object is a ModelConfigError naming the flag."""
    if value is None or isinstance(value, dict):
        return value or None
    if not value.strip():
        return None
    try:
        body = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{flag} is not valid JSON ({exc.msg} at character {exc.pos}); give an object, "
                               """e.g. '{"top_k": 20}'""") from None
    if not isinstance(body, dict):
        raise ModelConfigError(f"{flag} must be a JSON object of request fields, e.g. '{{\"top_k\": 20}}', "
                               f"not {type(body).__name__}")
    reserved = sorted({"model", "messages", "tools"} & set(body))
    if reserved:
        raise ModelConfigError(f"{flag} sets {', '.join(reserved)}, which QitOS sends itself; leave "
                               f"{'it' if len(reserved) == 1 else 'them'} out")
    return body


def check_generation(*, top_p: float | None = None, reasoning_effort: str | None = None,
                     extra_body: dict[str, Any] | None = None, max_retries: int | None = None,
                     request_timeout: float | None = None, prefix: str = "--") -> None:
    """Refuse values no server accepts, naming the flag (`prefix` "--user-" for the simulated user's)."""
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ModelConfigError(f"{prefix}top-p {top_p}: must be in (0, 1]")
    if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
        raise ModelConfigError(f"{prefix}reasoning-effort '{reasoning_effort}': use one of "
                               f"{', '.join(REASONING_EFFORTS)}")
    if max_retries is not None and max_retries < 0:
        raise ModelConfigError(f"{prefix}max-retries {max_retries}: must be 0 or more")
    if request_timeout is not None and not request_timeout > 0:
        raise ModelConfigError(f"{prefix}request-timeout {request_timeout}: must be more than 0 seconds")
    if extra_body is not None and not isinstance(extra_body, dict):
        raise ModelConfigError(f"{prefix}extra-body must be a JSON object")


def as_sent(params: dict[str, Any]) -> dict[str, Any]:
    """`params` as the request carries them: `extra_body` is merged into the request last, so a field it sets
    (`--extra-body '{"temperature": 0.6}'`) replaces the flag's value, and the RunSpec records that one."""
    extra = params.get("extra_body") if isinstance(params.get("extra_body"), dict) else {}
    return {**params, **{key: extra[key] for key in SENT_KEYS if key in extra}}


def replaced_flags(body: dict[str, Any] | None, flags: dict[str, Any], prefix: str = "--") -> list[str]:
    """One warning per flag whose value an `--extra-body` field replaces (both given, different values)."""
    out = []
    for key, value in (flags or {}).items():
        if body and key in body and value is not None and body[key] != value:
            flag = prefix + key.replace("_", "-")
            out.append(f"{prefix}extra-body sets {key} {json.dumps(body[key])}, which replaces {flag} {value} in "
                       "every request (the RunSpec records what is sent); keep one")
    return out

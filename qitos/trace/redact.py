"""Secret redaction applied to everything a trace, a results file or an export writes.

Secrets are removed by key (api_key, authorization, token, ...) and by value, in every field at
every depth, model text and tool output included: a key that the model or a tool echoes back is
caught wherever it lands. The values come from

- environment variables whose names look secret (`..._API_KEY`, `..._TOKEN`, `...SECRET`, `...PASSWORD`);
- environment variables *marked* secret whatever their names: the model's `--api-key-env`, each
  `--secret-env NAME`, and the comma-separated names in `QITOS_SECRET_ENV` (marking one sets that
  variable, so worker processes started later inherit the marks);
- values registered at run time with `register_secret` (process-wide) or `Redactor.add_secret`.

Values shorter than `MIN_SECRET_LENGTH` are ignored: replacing every "1234" in a trace would hide
more than it protects. Credentials in URLs (`scheme://user:password@host`) are scrubbed whatever
their length: the password (or a bare `scheme://token@`) becomes `[REDACTED]`, the user name stays.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import orjson

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
SECRET_ENV_VARIABLE = "QITOS_SECRET_ENV"
_SECRET_KEY_NAMES = r"api[_-]?key|authorization|auth[_-]?token|access[_-]?token|secret|password|bearer|token"
_SECRET_KEY = re.compile(f"({_SECRET_KEY_NAMES})$", re.I)
# A key `_SECRET_KEY` matches, as a JSON document spells it: the name (a last newline escaped) right before `":`,
# a pair no string value can end in (its quotes are escaped).
_SECRET_KEY_IN_JSON = re.compile(f'({_SECRET_KEY_NAMES})(\\\\n)?":', re.I)
# ... the same test on an ASCII document, lowered: substring tests (the regex costs ~60 us on a 500-byte line).
# `auth_token` and `access_token` end in `token`.
_SECRET_KEY_ENDINGS = tuple(f'{name}{newline}":' for name in ("api_key", "api-key", "apikey", "authorization", "secret",
                                                             "password", "bearer", "token") for newline in ("", "\\n"))
# Environment variables whose values are always treated as secrets when set.
_SECRET_ENV = re.compile(r"(API_KEY|_TOKEN|SECRET|PASSWORD)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# URL userinfo: `scheme://user:password@` or `scheme://token@` (slashes maybe JSON-escaped). The password
# may hold a raw "@" (the host follows the last one); none of the parts crosses a quote, space or "/".
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*:\\?/\\?/)(?P<user>[^\s/?#@:\"'<>\\`]*)"
                       r"(?P<password>:[^\s/?#\"'<>\\`]*)?@")



def _json(v: str) -> str:
    return json.dumps(v, ensure_ascii=False)[1:-1]


def _jinja(v: str) -> str:
    """markupsafe's escaping (Jinja templates: the board and the HTML exports)."""
    return (v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;")
            .replace("'", "&#39;"))


# How a value is spelled once written into the documents QitOS makes: as is, in JSON strings, in HTML
# (also JSON inside HTML, e.g. replay frames), in CSV cells. Each spelling is redacted.
_SPELLINGS = (lambda v: v, _json, lambda v: json.dumps(v)[1:-1], html.escape, lambda v: html.escape(v, quote=False),
              _jinja, lambda v: _jinja(_json(v)), lambda v: html.escape(_json(v)), lambda v: v.replace('"', '""'))
_registered: set[str] = set()
_lock = threading.Lock()
_generation = 0  # bumped whenever a secret is registered or marked, so existing Redactors pick it up


def _bump() -> None:
    global _generation
    _generation += 1


def has_secret_key(document: str) -> bool:
    """Whether a JSON document holds a key `scrub` redacts by name."""
    if not document.isascii():  # re.I also folds a few non-ASCII letters (K, ſ, İ, ı) onto ASCII ones
        return _SECRET_KEY_IN_JSON.search(document) is not None
    low = document.lower()
    return any(map(low.__contains__, _SECRET_KEY_ENDINGS))


@lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    """Keys repeat in every event (role, content, arguments...): match each name once."""
    return _SECRET_KEY.search(key) is not None


def marked_secret_envs() -> list[str]:
    """Names of environment variables marked secret (from `QITOS_SECRET_ENV`)."""
    return [n for n in (p.strip() for p in os.environ.get(SECRET_ENV_VARIABLE, "").split(",")) if n]


def mark_secret_env(names: Iterable[str]) -> None:
    """Treat these environment variables' values as secrets, in this process and in workers it starts."""
    names = [n.strip() for n in names if n and n.strip()]
    for name in names:
        if not _ENV_NAME.match(name):
            raise ValueError(f"secret environment variable name {name!r} is not a valid variable name")
    with _lock:
        current = marked_secret_envs()
        merged = current + [n for n in names if n not in current]
        if merged != current:
            os.environ[SECRET_ENV_VARIABLE] = ",".join(merged)
            _bump()


def register_secret(value: str | None) -> None:
    """Redact this value in every trace and export this process writes from now on."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)
            _bump()


def secret_values() -> set[str]:
    """Every secret value known right now: secret-looking env names, marked env names, registered values."""
    values = _secret_env_values()
    values.update(os.environ.get(name, "") for name in marked_secret_envs())
    with _lock:
        values.update(_registered)
    return {v for v in values if len(v) >= MIN_SECRET_LENGTH}


_SECRET_ENV_SUFFIXES = (b"API_KEY", b"_TOKEN", b"SECRET", b"PASSWORD")  # `_SECRET_ENV` without a regex per name


def _secret_env_name(name: bytes) -> bool:
    """`_SECRET_ENV.search` on a name's bytes (`$` also matches before a final newline)."""
    return name.endswith(_SECRET_ENV_SUFFIXES) or (name.endswith(b"\n") and name[:-1].endswith(_SECRET_ENV_SUFFIXES))


def _secret_env_values() -> set[str]:
    """Values of the secret-looking environment variables. Read from the environment's own dict of bytes where it
    has one (CPython on POSIX: `os.environ._data`): walking `os.environ` costs a Python-level lookup and decoding per
    variable, more than the rest of a Redactor, and a batch makes two per task. Only matches are decoded, as
    `os.environ` decodes them."""
    global _env_seen
    data = getattr(os.environ, "_data", None)
    if os.name != "posix" or not isinstance(data, dict):
        return {v for k, v in os.environ.items() if _SECRET_ENV.search(k)}
    seen = _env_seen  # the environment as last read, and its secrets: equal dicts compare in C, without decoding
    if seen is not None and seen[0] == data:
        return set(seen[1])
    copy = dict(data)
    values = frozenset(os.fsdecode(v) for k, v in copy.items()
                       if isinstance(k, bytes) and isinstance(v, bytes) and _secret_env_name(k))
    _env_seen = (copy, values)
    return set(values)


_env_seen: tuple[dict, frozenset[str]] | None = None  # `_secret_env_values`' last reading


@lru_cache(maxsize=32)
def _compiled(values: frozenset[str]) -> tuple[list[str], list[str], re.Pattern[str] | None, tuple[str, ...]]:
    """Values longest first, their spellings, one pattern matching any, and their anchors: built once per set of
    secrets (a batch makes a Redactor per task, all with the same secrets)."""
    ordered_values = sorted(values, key=len, reverse=True)
    # documents hold values escaped too (JSON strings, HTML pages): match those spellings as well
    spellings = sorted({f(v) for v in ordered_values for f in _SPELLINGS}, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(v) for v in spellings)) if spellings else None
    return ordered_values, spellings, pattern, tuple({_anchor(v) for v in ordered_values})


_UNESCAPED = re.compile(r"[\x20-\x7e]+")  # printable ASCII: no spelling escapes it, bar the characters below


def _anchor(value: str) -> str:
    """The longest part of `value` that every spelling, and every spelling of a spelling (a JSON document inside a
    JSON string), keeps as it is: a document without it holds the value in no form."""
    runs = [run for part in _UNESCAPED.findall(value) for run in re.split(r"[\"\\&<>']", part)]
    return max(runs, key=len, default="")


_REDACTOR_VERSIONS = itertools.count(1)


class Redactor:
    """Scrubs secrets by key and by value; built from `secret_values()` plus `extra_values`."""

    def __init__(self, extra_values: list[str] | None = None) -> None:
        values = secret_values()
        values.update(v for v in (extra_values or []) if v and len(v) >= MIN_SECRET_LENGTH)
        self._set(values)

    def _set(self, values: set[str]) -> None:
        self._generation = _generation
        self._values, self._spellings, self._pattern, self._anchors = _compiled(frozenset(values))
        self._version = next(_REDACTOR_VERSIONS)

    @property
    def version(self) -> int:
        """Changes whenever the secrets this redactor scrubs change: text it scrubbed under an older version may
        hold a secret known only now (`manifest_json` keeps scrubbed text while this stays the same)."""
        self._refresh()
        return self._version

    def _refresh(self) -> None:
        """Take in the secrets registered or marked since this redactor was built (or last refreshed)."""
        if self._generation != _generation:
            self._set(set(self._values) | secret_values())

    @property
    def active(self) -> bool:
        """Whether any secret value is known (when not, scrubbing by value is a no-op)."""
        self._refresh()
        return self._pattern is not None

    def add_secret(self, value: str | None) -> None:
        if value and len(value) >= MIN_SECRET_LENGTH and value not in self._values:
            self._set(set(self._values) | {value})

    def scrub_text(self, text: str) -> str:
        self._refresh()
        if "@" in text:
            text = redact_url_credentials(text)
        if self._pattern is None or not any(s in text for s in self._spellings):  # substring tests are fast
            return text
        return self._pattern.sub(REDACTED, text)

    def scrub_json(self, value: Any, dumps: Callable[[Any], str]) -> str:
        """`dumps(scrub(value))`, then `scrub_text`: one JSON document, redacted; walked only when `_walk_needed`."""
        text = dumps(value)
        if self._walk_needed(text):
            text = dumps(self._walk(value))
        return self.scrub_text(text)

    def scrub(self, value: Any, key: str | None = None) -> Any:
        """A redacted copy: secret-named keys lose their values, every string loses secret values (a container with
        nothing to redact is returned as it is: its dump shows that at a fraction of the walk's cost)."""
        if isinstance(value, (dict, list)) and (key is None or not _is_secret_key(key)):
            try:
                document = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
            except TypeError:  # something orjson does not write (an object, an integer beyond 64 bits): walked
                document = None
            if document is not None and not self._walk_needed(document):
                return value
        return self._walk(value, key)

    def _walk_needed(self, document: str) -> bool:
        """Whether the walk could remove anything from a JSON document's value: a secret-named key, a URL's
        credentials, or a secret in any spelling (its anchor is in the document). Most documents have none of these,
        and the walk cost about a tenth of the scoring side's CPU per task (a few hundred calls)."""
        self._refresh()
        return "@" in document or has_secret_key(document) or any(map(document.__contains__, self._anchors))

    def _walk(self, value: Any, key: str | None = None) -> Any:
        if key is not None and _is_secret_key(key) and not isinstance(value, (dict, list)) and value not in (None, ""):
            return REDACTED
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, dict):
            return {self.scrub_text(k) if isinstance(k, str) else k: self._walk(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._walk(v) for v in value]
        return value


def _userinfo(match: re.Match[str]) -> str:
    if match["password"] is None:  # `scheme://token@`: the whole userinfo may be the credential
        return f"{match['scheme']}{REDACTED}@" if match["user"] else match[0]
    return f"{match['scheme']}{match['user']}:{REDACTED}@"


def redact_url_credentials(text: str) -> str:
    """`http://user:pw@host` -> `http://user:[REDACTED]@host` (and `http://token@` -> `http://[REDACTED]@`)."""
    if "@" not in text or (":/" not in text and ":\\/" not in text):  # no URL with userinfo possible: skip the scan
        return text
    return _USERINFO.sub(_userinfo, text)


def redact_text(text: str) -> str:
    """Scrub one finished document (an export, a results line) with the secrets known now."""
    return Redactor().scrub_text(text)

"""Secret redaction applied to everything written to a trace, except model text.

Secrets are removed by key (api_key, authorization, token, ...) and by value (the values of
the API-key environment variables in use, and any value registered at run time), so a key
that leaks into a tool argument or an error message is still caught.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

REDACTED = "[REDACTED]"
_SECRET_KEY = re.compile(r"(api[_-]?key|authorization|auth[_-]?token|access[_-]?token|secret|password|bearer|token)$", re.I)
# Environment variables whose values are always treated as secrets when set.
_SECRET_ENV = re.compile(r"(API_KEY|_TOKEN|SECRET|PASSWORD)$")
# Keys whose string values are what the model wrote; they are never altered.
MODEL_TEXT_KEYS = frozenset({"text", "model_response", "final_answer", "rationale"})


@lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    """Keys repeat in every event (role, content, arguments...): match each name once."""
    return _SECRET_KEY.search(key) is not None


class Redactor:
    def __init__(self, extra_values: list[str] | None = None) -> None:
        values = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8}
        values.update(v for v in (extra_values or []) if v and len(v) >= 8)
        self._values = sorted(values, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in self._values)) if self._values else None

    def add_secret(self, value: str | None) -> None:
        if value and len(value) >= 8 and value not in self._values:
            self.__init__(self._values + [value])

    def scrub_text(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text) if self._pattern else text

    def scrub(self, value: Any, key: str | None = None, in_model_text: bool = False) -> Any:
        """Return a redacted copy; strings under model-text keys are left exactly as the model wrote them."""
        if key is not None and _is_secret_key(key) and not isinstance(value, (dict, list)) and value not in (None, ""):
            return REDACTED
        model_text = in_model_text or (key in MODEL_TEXT_KEYS)
        if isinstance(value, str):
            return value if model_text else self.scrub_text(value)
        if isinstance(value, dict):
            return {k: self.scrub(v, str(k), model_text) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v, None, model_text) for v in value]
        return value

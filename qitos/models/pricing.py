"""Prices per million tokens, shipped as data (`prices.json`) and overridable by a file.

Lookup is by exact model id, then by the longest known prefix (so dated snapshots such as
`gpt-4o-2024-08-06` find `gpt-4o`). Unknown models cost None (unknown), never a guess.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

from qitos.models.base import ModelConfigError, Usage


@lru_cache(maxsize=4)
def load_price_table(override: str | None = None) -> dict[str, dict[str, float]]:
    table = json.loads(resources.files("qitos.models").joinpath("prices.json").read_text())
    path = override or os.environ.get("QITOS_PRICE_TABLE")
    if path:
        try:
            table.update(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelConfigError(f"price table '{path}' could not be read: {exc}") from None
    return {k: v for k, v in table.items() if not k.startswith("_")}


def cost_of(model_id: str, usage: Usage, override: str | None = None) -> float | None:
    table = load_price_table(override)
    price = table.get(model_id)
    if price is None:
        prefixes = [k for k in table if model_id.startswith(k)]
        price = table[max(prefixes, key=len)] if prefixes else None
    if price is None:
        return None
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    fresh = usage.prompt_tokens - cached
    cached_rate = price.get("cached_input", price["input"])
    output = usage.completion_tokens + reasoning_apart(usage)
    return round((fresh * price["input"] + cached * cached_rate + output * price["output"]) / 1e6, 8)


def reasoning_apart(usage: Usage) -> int:
    """Reasoning tokens billed on top of `completion_tokens`: 0 in the OpenAI convention (completion_tokens
    includes them); all of them where a provider counts them apart, which its total shows
    (total = prompt + completion + reasoning)."""
    r = usage.reasoning_tokens
    if r and usage.total_tokens >= usage.prompt_tokens + usage.completion_tokens + r:
        return r
    return 0

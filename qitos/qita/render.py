"""The Jinja2 environment shared by the board and the export, with its display filters.

Autoescaping is on for every template: trace text (model output, tool results, task text)
is untrusted and must render as text. Nothing here marks trace data `safe`. Missing fields
render empty (ChainableUndefined): a partial or foreign manifest still renders.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import ChainableUndefined, Environment, PackageLoader, Undefined, select_autoescape

from .configs import NO_BENCHMARK


def _defined(value: Any) -> Any:
    """Missing manifest fields arrive as Undefined; filters treat them as None."""
    return None if isinstance(value, Undefined) else value


def pretty(value: Any, limit: int = 100_000) -> str:
    value = _defined(value)
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def compact(value: Any, limit: int = 160) -> str:
    value = _defined(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def num(value: Any, digits: int = 3) -> str:
    value = _defined(value)
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def pct(value: Any) -> str:
    value = _defined(value)
    return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else "–"


def usd(value: Any) -> str:
    value = _defined(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "unknown"
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def seconds(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def when(value: Any) -> str:
    """ISO timestamp → 'YYYY-MM-DD HH:MM:SS' (UTC) for tables."""
    if not isinstance(value, str):
        return "–"
    return value.replace("T", " ")[:19]


def bench_label(value: Any) -> str:
    """A benchmark group's heading: runs made outside any benchmark get words, not "(none)"."""
    return "runs outside a benchmark" if value in (None, "", NO_BENCHMARK) else str(value)


@lru_cache(maxsize=8)
def static_text(name: str) -> str:
    return resources.files("qitos.qita").joinpath("static", name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=PackageLoader("qitos.qita", "templates"), autoescape=select_autoescape(["html", "j2"]),
                      undefined=ChainableUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pretty=pretty, compact=compact, num=num, pct=pct, usd=usd, seconds=seconds, when=when,
                       bench_label=bench_label)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)

"""Helpers shared by the metric modules: rule matching (`{method, ref}`), tolerant file and JSON reading."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PathLike = str | Path


def read_text(path: PathLike | None) -> str | None:
    """File text (UTF-8, undecodable bytes replaced), or None when there is no file."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        return None
    return p.read_text(encoding="utf-8", errors="replace")


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def rules_value(rules: Any, key: str = "expected") -> Any:
    """`rules[key]` when rules is the inline-rule dict, else the value itself (metrics get either)."""
    if isinstance(rules, Mapping) and key in rules:
        return rules[key]
    return rules


_LINE_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMA = re.compile(r'("(?:\\.|[^"\\])*")|,(\s*[}\]])')


def loads_jsonc(text: str) -> Any:
    """Parse JSON that may carry // and /* */ comments and trailing commas (VS Code settings files)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    stripped = _LINE_COMMENT.sub(lambda m: m.group(1) or "", text)
    stripped = _TRAILING_COMMA.sub(lambda m: m.group(1) or m.group(2), stripped)
    return json.loads(stripped)


def match_rule(value: Any, rule: Mapping[str, Any]) -> bool:
    """Check `value` against `{method, ref}`.

    Methods used by the task files: `eq`, `ne`, `re` / `re.S` (search, optional flags after the dot),
    `approx:<tol>` (absolute tolerance), `lt`/`le`/`gt`/`ge`, `str_set_eq` (comma list vs set), `in`, and
    `spreadsheet_range` (handled by table rules, here a plain equality fallback).
    """
    method = str(rule.get("method", "eq"))
    ref = rule.get("ref")
    if method == "eq":
        return values_equal(value, ref)
    if method == "ne":
        return not values_equal(value, ref)
    if method == "re" or method.startswith("re."):
        flags = 0
        for flag in method.split(".")[1:]:
            flags |= getattr(re, flag.upper(), 0)
        return value is not None and re.search(str(ref), str(value), flags) is not None
    if method.startswith("approx"):
        tolerance = float(method.partition(":")[2] or 1e-6)
        number = to_number(value)
        return number is not None and abs(number - float(ref)) <= tolerance
    if method in ("lt", "le", "gt", "ge"):
        number = to_number(value)
        if number is None:
            return False
        target = float(ref)
        return {"lt": number < target, "le": number <= target, "gt": number > target, "ge": number >= target}[method]
    if method == "str_set_eq":
        items = value if isinstance(value, (list, tuple, set)) else str(value or "").strip('"').split(",")
        return {str(i).strip() for i in items} == {str(r).strip() for r in as_list(ref)}
    if method == "in":
        return value in as_list(ref)
    raise ValueError(f"unknown match method '{method}'")


def values_equal(a: Any, b: Any) -> bool:
    """Equality that treats 1 and 1.0 (and numeric strings vs numbers) as equal."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)), abs(float(b)))
    return a == b


def to_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return None


def normalise_space(text: str) -> str:
    return " ".join(text.split())


def score(ok: bool) -> float:
    return 1.0 if ok else 0.0

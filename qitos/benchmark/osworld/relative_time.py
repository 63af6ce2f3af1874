"""The `rule_relativeTime` expected getter: turn phrases like "next Monday" into dates and fill the
expected values' placeholders ({Year}, {Month}, {DayD}, ...), so date-dependent web tasks score on any day.

Phrase meanings (decisions, since upstream only shows examples):
- `today`, `tomorrow`, `yesterday`;
- `this <weekday>`: the nearest such day on or after today; `next <weekday>`: the nearest one after today;
- `this month` / `next month`: the first day of that month; `<N>th next month`: day N of next month;
- `first <weekday> <N> months later` (N in digits or words): the first such weekday of the month N months on.
Placeholders: {Year} 2024, {Month} Jan, {MonthFull} January, {month} january, {Month0D} 01, {DoW} Mon,
{DayD} 5, {Day0D} 05. With a `to` phrase, the expected key named `to` uses that date, all others `from`.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from .errors import TaskFormatError

_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "eleven": 11, "twelve": 12}


def _add_months(day: dt.date, months: int, day_of_month: int = 1) -> dt.date:
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    last = calendar.monthrange(year, month)[1]
    return dt.date(year, month, min(day_of_month, last))


def resolve_phrase(phrase: str, today: dt.date) -> dt.date:
    """Date named by a relative phrase; unknown phrases raise TaskFormatError naming the phrase."""
    text = " ".join(phrase.lower().split())
    fixed = {"today": 0, "tomorrow": 1, "yesterday": -1}
    if text in fixed:
        return today + dt.timedelta(days=fixed[text])
    match = re.fullmatch(r"(this|next) (\w+)", text)
    if match and match.group(2) in _WEEKDAYS:
        ahead = (_WEEKDAYS[match.group(2)] - today.weekday()) % 7
        if match.group(1) == "next" and ahead == 0:
            ahead = 7
        return today + dt.timedelta(days=ahead)
    if text in ("this month", "next month"):
        return _add_months(today, 0 if text == "this month" else 1)
    match = re.fullmatch(r"(\d+)(?:st|nd|rd|th)? next month", text)
    if match:
        return _add_months(today, 1, int(match.group(1)))
    match = re.fullmatch(r"first (\w+) (\w+) months? later", text)
    if match and match.group(1) in _WEEKDAYS:
        count = _NUMBERS.get(match.group(2)) or (int(match.group(2)) if match.group(2).isdigit() else None)
        if count is not None:
            start = _add_months(today, count)
            return start + dt.timedelta(days=(_WEEKDAYS[match.group(1)] - start.weekday()) % 7)
    raise TaskFormatError(f"rule_relativeTime: unsupported relative time phrase '{phrase}'")


def fill_placeholders(template: str, day: dt.date) -> str:
    values = {
        "Year": str(day.year),
        "Month": calendar.month_abbr[day.month],
        "MonthFull": calendar.month_name[day.month],
        "month": calendar.month_name[day.month].lower(),
        "Month0D": f"{day.month:02d}",
        "DoW": calendar.day_abbr[day.weekday()],
        "DayD": str(day.day),
        "Day0D": f"{day.day:02d}",
    }
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def relative_time_rules(rules: Mapping[str, Any], today: dt.date | None = None) -> dict[str, Any]:
    """Rules with `expected` placeholders filled from `relativeTime` (`from`, optional `to`)."""
    today = today or dt.date.today()
    phrases = rules.get("relativeTime") or {}
    if "from" not in phrases:
        raise TaskFormatError("rule_relativeTime: rules.relativeTime needs a 'from' phrase")
    start = resolve_phrase(str(phrases["from"]), today)
    end = resolve_phrase(str(phrases["to"]), today) if "to" in phrases else start
    expected = rules.get("expected") or {}
    filled = {
        key: fill_placeholders(value, end if key == "to" else start) if isinstance(value, str) else value
        for key, value in expected.items()
    }
    return {**dict(rules), "expected": filled}

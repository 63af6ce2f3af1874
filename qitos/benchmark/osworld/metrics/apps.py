"""Application-profile metrics: Thunderbird (prefs, filters, mail folders), GIMP config files, LibreOffice's
registry (`registrymodifications.xcu`) and SQLite queries on profile databases."""

from __future__ import annotations

import json
import mailbox
import re
import sqlite3
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from contextlib import closing
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

from ._util import as_list, match_rule, read_text, score

# ---------------------------------------------------------------- Thunderbird

_PREF_LINE = re.compile(r'^\s*user_pref\(\s*"((?:\\.|[^"\\])*)"\s*,\s*(.*?)\s*\)\s*;\s*$')


def parse_prefs_js(text: str) -> dict[str, Any]:
    """`user_pref("name", value);` lines of a Mozilla prefs.js into a dict (values decoded as JSON)."""
    prefs: dict[str, Any] = {}
    for line in text.splitlines():
        match = _PREF_LINE.match(line)
        if not match:
            continue
        name = json.loads(f'"{match.group(1)}"')
        raw = match.group(2)
        try:
            prefs[name] = json.loads(raw)
        except json.JSONDecodeError:
            prefs[name] = raw
    return prefs


def check_thunderbird_prefs(result: Any, expected: Any = None, **_: Any) -> float:
    """`rules.expect`: each pref is set and matches its `{method, ref}`; `rules.unexpect`: no pref matches.

    An `unexpect` pref that is absent passes (Thunderbird only writes prefs that differ from the default).
    """
    text = read_text(result)
    if text is None or not isinstance(expected, Mapping):
        return 0.0
    prefs = parse_prefs_js(text)
    for name, rule in (expected.get("expect") or {}).items():
        if name not in prefs or not match_rule(prefs[name], rule):
            return 0.0
    for name, rule in (expected.get("unexpect") or {}).items():
        if name in prefs and match_rule(prefs[name], rule):
            return 0.0
    return 1.0


def parse_filter_rules(text: str) -> list[dict[str, list[str]]]:
    """msgFilterRules.dat into filters; every key maps to the list of its values (actions can repeat)."""
    filters: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] | None = None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        value = value.strip()
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1].replace('\\"', '"')
        if key == "name":
            current = {}
            filters.append(current)
        if current is not None:
            current.setdefault(key, []).append(value)
    return filters


def check_thunderbird_filter(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff each `rules.expect` filter matches some filter (str: one of the values; list: all values) and no
    `rules.unexpect` filter matches."""
    text = read_text(result)
    if text is None or not isinstance(expected, Mapping):
        return 0.0
    filters = parse_filter_rules(text)

    def matches(actual: dict[str, list[str]], want: Mapping[str, Any]) -> bool:
        for key, value in want.items():
            values = actual.get(key, [])
            if isinstance(value, list):
                if [str(v) for v in value] != values:
                    return False
            elif str(value) not in values:
                return False
        return True

    ok = all(any(matches(f, w) for f in filters) for w in expected.get("expect", []))
    ok = ok and not any(matches(f, w) for f in filters for w in expected.get("unexpect", []))
    return score(ok)


_MOZ_DELETED = 0x0008


def _message_keys(path: Any, remove_deleted: bool, remove_duplicate: bool) -> list[tuple[str, ...]] | None:
    if path is None or not Path(path).is_file():
        return None
    messages: list[Message]
    if str(path).endswith(".eml"):
        messages = [message_from_bytes(Path(path).read_bytes())]
    else:
        box = mailbox.mbox(str(path), create=False)
        try:
            messages = list(box)
        finally:
            box.close()
    keys = []
    for msg in messages:
        status = str(msg.get("X-Mozilla-Status", "0")).strip() or "0"
        try:
            deleted = int(status, 16) & _MOZ_DELETED
        except ValueError:
            deleted = 0
        if remove_deleted and deleted:
            continue
        keys.append(tuple(str(msg.get(h, "")).strip() for h in ("Message-ID", "Subject", "From", "Date")))
    if remove_duplicate:
        keys = list(dict.fromkeys(keys))
    return sorted(keys)


def check_thunderbird_folder(
    result: Any, expected: Any = None, remove_deleted: bool = True, remove_duplicate: bool = True, **_: Any
) -> float:
    """1 iff each result mail folder (mbox file, or .eml) holds the same messages as its gold folder.

    Messages are identified by Message-ID, Subject, From and Date; bodies are not compared. Deleted
    messages (X-Mozilla-Status flag) and exact duplicates are dropped first unless disabled.
    """
    got_paths, want_paths = as_list(result), as_list(expected)
    if not got_paths or len(got_paths) != len(want_paths):
        return 0.0
    for got, want in zip(got_paths, want_paths):
        a = _message_keys(got, remove_deleted, remove_duplicate)
        b = _message_keys(want, remove_deleted, remove_duplicate)
        if a is None or b is None or a != b:
            return 0.0
    return 1.0


# ---------------------------------------------------------------- GIMP


def check_config_status(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the GIMP config file has a line `(<key...> <value>)`; `rules.key` may be a list of leading tokens."""
    text = read_text(result)
    if text is None or not isinstance(expected, Mapping):
        return 0.0
    want = [str(k) for k in as_list(expected.get("key"))] + [str(expected.get("value"))]
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("(") and line.endswith(")"):
            tokens = line[1:-1].split(None, len(want) - 1)
            if [t.strip() for t in tokens] == want:
                return 1.0
    return 0.0


# ---------------------------------------------------------------- LibreOffice registry

_OOR = "{http://openoffice.org/2001/registry}"


def parse_xcu(path: Any) -> dict[tuple[str, str], str] | None:
    """registrymodifications.xcu into {(item path, prop name): value text}; None when unreadable."""
    if path is None or not Path(path).is_file():
        return None
    try:
        root = ET.parse(str(path)).getroot()
    except ET.ParseError:
        return None
    values: dict[tuple[str, str], str] = {}
    for item in root.iter("item"):
        item_path = item.get(f"{_OOR}path", "")
        for prop in item.iter("prop"):
            value = prop.find("value")
            values[(item_path, prop.get(f"{_OOR}name", ""))] = (value.text or "") if value is not None else ""
    return values


def check_auto_saving_time(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff LibreOffice's autosave interval equals `rules.minutes` (either registry key spelling)."""
    values = parse_xcu(result)
    if values is None or not isinstance(expected, Mapping):
        return 0.0
    for (path, name), value in values.items():
        if (name == "TimeIntervall" and path.endswith("/AutoSave")) or name == "AutoSaveTimeIntervall":
            return score(value.strip() == str(expected.get("minutes")))
    return 0.0


def find_default_font(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff Writer's default (Standard) font is `rules.font_name`."""
    values = parse_xcu(result)
    if values is None or not isinstance(expected, Mapping):
        return 0.0
    return score(values.get(("/org.openoffice.Office.Writer/DefaultFont", "Standard")) == expected.get("font_name"))


def check_presenter_console_disable(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff Impress's presenter console is switched off (`EnablePresenterScreen` = false)."""
    values = parse_xcu(result)
    if values is None:
        return 0.0
    flag = values.get(("/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen"))
    return score(flag is not None and flag.strip().lower() == "false")


# ---------------------------------------------------------------- SQLite


def run_sqlite3(result: Any, expected: Any = None, **_: Any) -> float:
    """Run `rules.sql` (read-only) on the database; 1 iff the first column of the first row is truthy."""
    if result is None or not Path(result).is_file() or not isinstance(expected, Mapping):
        return 0.0
    try:
        with closing(sqlite3.connect(f"file:{Path(result)}?mode=ro", uri=True)) as conn:
            row = conn.execute(str(expected["sql"])).fetchone()
    except sqlite3.DatabaseError:
        return 0.0
    return score(bool(row and row[0]))


METRICS = {
    "check_thunderbird_prefs": check_thunderbird_prefs,
    "check_thunderbird_filter": check_thunderbird_filter,
    "check_thunderbird_folder": check_thunderbird_folder,
    "check_config_status": check_config_status,
    "check_auto_saving_time": check_auto_saving_time,
    "find_default_font": find_default_font,
    "check_presenter_console_disable": check_presenter_console_disable,
    "run_sqlite3": run_sqlite3,
}

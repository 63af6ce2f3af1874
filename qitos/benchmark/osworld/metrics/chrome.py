"""Browser-state metrics (Chrome): active tab, open tabs, bookmarks, extensions, profile databases.

The browser getters (see `provider.py`) produce plain values: a tab is `{"title", "url"}` (or just the URL
string), bookmarks are Chrome's `Bookmarks["roots"]` object, history and cookies are paths to copies of the
profile's SQLite files, desktop shortcuts are `{file name: .desktop text}`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from ._util import as_list, rules_value, score


def _url(tab: Any) -> str | None:
    if isinstance(tab, Mapping):
        url = tab.get("url")
        return str(url) if url is not None else None
    return str(tab) if tab is not None else None


def _same_url(a: str, b: str) -> bool:
    """URLs are equal up to one trailing slash (Chrome adds it to bare origins)."""
    return a.rstrip("/") == b.rstrip("/")


def is_expected_active_tab(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the active tab's URL equals `rules.url` (rules type `url`)."""
    url = _url(result)
    rules = expected if isinstance(expected, Mapping) else {}
    if url is None or rules.get("type", "url") != "url":
        return 0.0
    return score(_same_url(url, str(rules.get("url", ""))))


def is_expected_url_pattern_match(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every regex in `rules.expected` is found in the active tab's URL."""
    url = _url(result)
    if url is None:
        return 0.0
    return score(all(re.search(str(p), url) for p in as_list(rules_value(expected))))


def is_expected_tabs(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the open tabs' URLs equal `rules.urls`, in order (trailing slashes ignored)."""
    rules = expected if isinstance(expected, Mapping) else {}
    if result is None or rules.get("type", "url") != "url":
        return 0.0
    got = [_url(t) or "" for t in as_list(result)]
    want = [str(u) for u in rules.get("urls", [])]
    return score(len(got) == len(want) and all(_same_url(a, b) for a, b in zip(got, want)))


def is_expected_search_query(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the active tab's URL matches `rules.expect.pattern`."""
    url = _url(result)
    rules = expected if isinstance(expected, Mapping) else {}
    pattern = (rules.get("expect") or {}).get("pattern")
    return score(url is not None and pattern is not None and re.search(pattern, url) is not None)


def is_expected_bookmarks(result: Any, expected: Any = None, **_: Any) -> float:
    """Bookmark-bar checks by `rules.type`:

    - `bookmark_bar_folders_names`: the bar's folder names equal `names` (as sets);
    - `bookmark_bar_websites_urls`: the bar's URL bookmarks equal `urls` (as sets);
    - `liked_authors_websites_urls`: the bar folder `names[0]` holds one bookmark per entry of `urls`, each
      URL being one of that entry's alternatives.
    """
    if not isinstance(result, Mapping) or not isinstance(expected, Mapping):
        return 0.0
    bar = (result.get("bookmark_bar") or {}).get("children", [])
    kind = expected.get("type")
    if kind == "bookmark_bar_folders_names":
        names = {c.get("name") for c in bar if c.get("type") == "folder"}
        return score(names == set(expected.get("names", [])))
    if kind == "bookmark_bar_websites_urls":
        urls = {c.get("url") for c in bar if c.get("type") == "url"}
        return score(urls == set(expected.get("urls", [])))
    if kind == "liked_authors_websites_urls":
        folder_name = as_list(expected.get("names"))[0] if expected.get("names") else None
        folder = next((c for c in bar if c.get("type") == "folder" and c.get("name") == folder_name), None)
        if folder is None:
            return 0.0
        urls = [c.get("url", "") for c in folder.get("children", []) if c.get("type") == "url"]
        groups = [as_list(g) for g in expected.get("urls", [])]
        if len(urls) != len(groups):
            return 0.0
        remaining = list(groups)
        for url in urls:
            match = next((g for g in remaining if any(_same_url(url, alt) for alt in g)), None)
            if match is None:
                return 0.0
            remaining.remove(match)
        return 1.0
    return 0.0


def is_extension_installed(result: Any, expected: Any = None, **_: Any) -> float:
    """`rules.type` `contain` / `not_contain`: whether `rules.expected` occurs in the command output."""
    if result is None or not isinstance(expected, Mapping):
        return 0.0
    found = str(expected.get("expected", "")) in str(result)
    return score(found if expected.get("type", "contain") == "contain" else not found)


def is_expected_installed_extensions(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every expected extension name is among the installed extension names."""
    if result is None:
        return 0.0
    return score(set(as_list(rules_value(expected))) <= set(as_list(result)))


def check_font_size(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff Chrome's default font size lies in `[rules.min, rules.max]` (rules type `range`)."""
    size = result.get("default_font_size") if isinstance(result, Mapping) else result
    if size is None or not isinstance(expected, Mapping):
        return 0.0
    return score(float(expected.get("min", float("-inf"))) <= float(size) <= float(expected.get("max", float("inf"))))


def check_enabled_experiments(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every flag in `rules.names` was changed in chrome://flags (Local State's `enabled_labs_experiments`).

    Chrome stores a changed flag as `name@<option>`; the option suffix is ignored because the tasks name only
    the flag.
    """
    if result is None or not isinstance(expected, Mapping):
        return 0.0
    flags = {str(f).split("@", 1)[0] for f in as_list(result)}
    return score(set(expected.get("names", [])) <= flags)


def _query(path: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]] | None:
    if path is None or not Path(path).is_file():
        return None
    try:
        with closing(sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)) as conn:
            return conn.execute(sql, params).fetchall()
    except sqlite3.DatabaseError:
        return None


def is_cookie_deleted(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the Cookies database has no cookie for any of `rules.domains` (sub-domains included)."""
    rows = _query(result, "SELECT host_key FROM cookies")
    if rows is None or not isinstance(expected, Mapping):
        return 0.0
    domains = [str(d).lstrip(".") for d in expected.get("domains", [])]
    hosts = [str(r[0]).lstrip(".") for r in rows]
    return score(not any(h == d or h.endswith("." + d) for h in hosts for d in domains))


def check_history_deleted(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff no URL or title in the History database contains one of `rules.keywords`."""
    rows = _query(result, "SELECT url, title FROM urls")
    if rows is None or not isinstance(expected, Mapping):
        return 0.0
    keywords = [str(k).lower() for k in expected.get("keywords", [])]
    return score(not any(k in f"{u} {t}".lower() for u, t in rows for k in keywords))


def is_shortcut_on_desktop(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff some desktop `.desktop` file has `Name=` equal to `rules.name` (type `name`) or an `Exec=`/URL
    line containing `rules.exec` / `rules.url` (types `exec` / `url`)."""
    if not isinstance(result, Mapping) or not isinstance(expected, Mapping):
        return 0.0
    kind = expected.get("type", "name")
    for text in result.values():
        fields = dict(line.split("=", 1) for line in str(text).splitlines() if "=" in line)
        if kind == "name" and fields.get("Name") == expected.get("name"):
            return 1.0
        if kind == "exec" and str(expected.get("exec", "")) in fields.get("Exec", ""):
            return 1.0
        if kind == "url" and str(expected.get("url", "")) in str(text):
            return 1.0
    return 0.0


def is_added_to_steam_cart(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the cart page's content mentions every item of `rules.items`."""
    content = result.get("content") if isinstance(result, Mapping) else result
    if content is None or not isinstance(expected, Mapping):
        return 0.0
    return score(all(str(item) in str(content) for item in expected.get("items", [])))


METRICS = {
    "is_expected_active_tab": is_expected_active_tab,
    "is_expected_url_pattern_match": is_expected_url_pattern_match,
    "is_expected_tabs": is_expected_tabs,
    "is_expected_search_query": is_expected_search_query,
    "is_expected_bookmarks": is_expected_bookmarks,
    "is_extension_installed": is_extension_installed,
    "is_expected_installed_extensions": is_expected_installed_extensions,
    "check_font_size": check_font_size,
    "check_enabled_experiments": check_enabled_experiments,
    "is_cookie_deleted": is_cookie_deleted,
    "check_history_deleted": check_history_deleted,
    "is_shortcut_on_desktop": is_shortcut_on_desktop,
    "is_added_to_steam_cart": is_added_to_steam_cart,
}

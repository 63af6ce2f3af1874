"""General metrics: strings, command outputs, text/JSON/CSV files.

Convention for every metric in this package: `metric(result, expected=None, **options) -> float` in [0, 1],
where `result` is what the result getter produced (a local file path, a string, a dict ...), `expected` is the
expected getter's value (for inline `rule` getters: the `rules` dict), and `options` are the task's
`evaluator.options`. A missing result (None) scores 0.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
import tokenize
from collections.abc import Mapping
from typing import Any

from ..errors import MetricDependencyMissing
from ._util import as_list, loads_jsonc, match_rule, normalise_space, read_text, rules_value, score, values_equal


def exact_match(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result equals `rules.expected` exactly (command outputs keep their trailing newline)."""
    return score(result is not None and result == rules_value(expected))


def literal_match(result: Any, expected: Any = None, type: str = "str", ignore_case: bool = False, **_: Any) -> float:
    """Literal comparison; `type="list"` compares element-wise (both as lists of strings)."""
    if result is None:
        return 0.0
    expected = rules_value(expected)

    def norm(value: Any) -> str:
        text = str(value).strip()
        return text.lower() if ignore_case else text

    if type == "list":
        got, want = as_list(result), as_list(expected)
        return score(len(got) == len(want) and all(norm(a) == norm(b) for a, b in zip(got, want)))
    return score(norm(result) == norm(expected))


def fuzzy_match(result: Any, expected: Any = None, **_: Any) -> float:
    """Similarity ratio in [0, 1] (difflib) between the result and `rules.expected`; a graded score."""
    if result is None:
        return 0.0
    return difflib.SequenceMatcher(None, str(result), str(rules_value(expected))).ratio()


def is_in_list(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff `rules.expected` is an element of the result list (or a substring of a string result)."""
    if result is None:
        return 0.0
    return score(rules_value(expected) in result)


def check_include_exclude(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every `include` string occurs in the result text and no `exclude` string does."""
    if result is None:
        return 0.0
    rules = expected if isinstance(expected, Mapping) else {}
    text = str(result)
    return score(all(s in text for s in rules.get("include", [])) and not any(s in text for s in rules.get("exclude", [])))


def check_direct_json_object(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the result object holds every key of `rules.expected` with an equal value.

    A string result is parsed as JSON first (upstream scripts print dicts with single quotes, so those are
    swapped when plain JSON fails). String values compare after collapsing whitespace, since values scraped
    from HTML carry layout whitespace. With `expect_in_result`, an expected list means "any of these is a
    substring of the result value".
    """
    if result is None:
        return 0.0
    rules = expected if isinstance(expected, Mapping) else {}
    if isinstance(result, str):
        result = _parse_loose_json(result)
        if result is None:
            return 0.0
    if not isinstance(result, Mapping):
        return 0.0
    want = rules.get("expected", {})
    in_result = bool(rules.get("expect_in_result", False))
    for key, value in want.items():
        if key not in result:
            return 0.0
        got = result[key]
        if in_result:
            candidates = as_list(value)
            if not any(str(c) in str(got) for c in candidates):
                return 0.0
        elif isinstance(value, str) and isinstance(got, str):
            if normalise_space(value) != normalise_space(got):
                return 0.0
        elif not values_equal(got, value):
            return 0.0
    return 1.0


def _parse_loose_json(text: str) -> Any:
    for candidate in (text, text.replace("'", '"')):
        try:
            return json.loads(candidate.strip())
        except json.JSONDecodeError:
            continue
    return None


def check_list(result: Any, expected: Any = None, **_: Any) -> float:
    """Line patterns on a file: each `expect` regex matches some line, no `unexpect` regex matches any line."""
    text = read_text(result)
    if text is None:
        return 0.0
    rules = expected if isinstance(expected, Mapping) else {}
    lines = text.splitlines()
    for pattern in rules.get("expect", []):
        if not any(re.search(pattern, line) for line in lines):
            return 0.0
    for pattern in rules.get("unexpect", []):
        if any(re.search(pattern, line) for line in lines):
            return 0.0
    return 1.0


def compare_text_file(result: Any, expected: Any = None, ignore_blanks: bool = False, ignore_case: bool = False, **_: Any) -> float:
    """1 iff both text files are equal; `ignore_blanks` collapses all whitespace, `ignore_case` lowercases."""
    got, want = read_text(result), read_text(expected)
    if got is None or want is None:
        return 0.0
    if ignore_blanks:
        got, want = normalise_space(got), normalise_space(want)
    if ignore_case:
        got, want = got.lower(), want.lower()
    return score(got == want)


def diff_text_file(result: Any, expected: Any = None, **_: Any) -> float:
    """Graded similarity (difflib ratio over lines) between two text files; 1.0 when identical."""
    got, want = read_text(result), read_text(expected)
    if got is None or want is None:
        return 0.0
    return difflib.SequenceMatcher(None, got.splitlines(), want.splitlines()).ratio()


def compare_config(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the file's whole text equals `rules.expected` (exact, whitespace included)."""
    text = read_text(result)
    return score(text is not None and text == rules_value(expected))


def file_contains(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every string of `rules.expected` occurs in the file."""
    text = read_text(result)
    return score(text is not None and all(str(s) in text for s in as_list(rules_value(expected))))


_TIME_PREFIX = re.compile(r"^\d{1,2}:\d{2}:\d{2}")


def check_line_number(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the number of time-stamped lines (e.g. `sar` samples plus its column header) equals `rules.expected`.

    Decision: only lines that start with HH:MM:SS count, so banners, blank lines and the `Average:` footer
    of monitoring tools do not change the count.
    """
    text = read_text(result)
    if text is None:
        return 0.0
    count = sum(1 for line in text.splitlines() if _TIME_PREFIX.match(line.strip()))
    return score(count == int(str(rules_value(expected)).strip()))


def check_json_settings(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the settings file (JSON with comments allowed) contains every expected key with its value;
    nested dicts are compared as subsets, since other settings may live next to the expected one."""
    data = _load_json_file(result)
    if not isinstance(data, Mapping):
        return 0.0
    return score(_contains(data, rules_value(expected)))


def _contains(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and _contains(actual[k], v) for k, v in wanted.items())
    return values_equal(actual, wanted)


def check_json_keybindings(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the keybindings list holds an entry whose fields equal every field of `rules.expected`."""
    data = _load_json_file(result)
    want = rules_value(expected)
    if not isinstance(data, list) or not isinstance(want, Mapping):
        return 0.0
    return score(any(isinstance(e, Mapping) and all(e.get(k) == v for k, v in want.items()) for e in data))


def check_json(result: Any, expected: Any = None, is_yaml: bool = False, **_: Any) -> float:
    """`expect`/`unexpect` lists of `{key: [path...], method, ref}` checked against a JSON (or YAML) file."""
    text = read_text(result)
    if text is None:
        return 0.0
    if is_yaml:
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise MetricDependencyMissing("check_json with is_yaml needs PyYAML (pip install pyyaml)") from None
        data = yaml.safe_load(text)
    else:
        try:
            data = loads_jsonc(text)
        except json.JSONDecodeError:
            return 0.0
    rules = expected if isinstance(expected, Mapping) else {}
    for item in rules.get("expect", []):
        found, value = _dig(data, item["key"])
        if not found or not match_rule(value, item):
            return 0.0
    for item in rules.get("unexpect", []):
        found, value = _dig(data, item["key"])
        if found and match_rule(value, item):
            return 0.0
    return 1.0


def _dig(data: Any, keys: Any) -> tuple[bool, Any]:
    for key in as_list(keys):
        if isinstance(data, Mapping) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data):
            data = data[key]
        else:
            return False, None
    return True, data


def _load_json_file(path: Any) -> Any:
    text = read_text(path)
    if text is None:
        return None
    try:
        return loads_jsonc(text)
    except json.JSONDecodeError:
        return None


def check_csv(result: Any, expected: Any = None, **_: Any) -> float:
    """Rows of a CSV with a header: every `expect` dict matches some row, no `unexpect` dict matches any."""
    text = read_text(result)
    if text is None:
        return 0.0
    rows = list(csv.DictReader(io.StringIO(text)))
    rules = expected if isinstance(expected, Mapping) else {}

    def matches(row: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
        return all(str(row.get(k, "")) == str(v) for k, v in want.items())

    ok = all(any(matches(r, w) for r in rows) for w in rules.get("expect", []))
    ok = ok and not any(matches(r, w) for r in rows for w in rules.get("unexpect", []))
    return score(ok)


def compare_csv(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both CSV files hold the same rows (cells compared as text, trailing blank lines ignored)."""
    got, want = read_text(result), read_text(expected)
    if got is None or want is None:
        return 0.0

    def rows(text: str) -> list[list[str]]:
        parsed = [[c.strip() for c in row] for row in csv.reader(io.StringIO(text))]
        while parsed and not any(parsed[-1]):
            parsed.pop()
        return parsed

    return score(rows(got) == rows(want))


def compare_python_pure_text(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both Python files have the same token stream, ignoring comments, blank lines and spacing."""
    got, want = read_text(result), read_text(expected)
    if got is None or want is None:
        return 0.0
    return score(_python_tokens(got) == _python_tokens(want))


def _python_tokens(source: str) -> list[str] | str:
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return normalise_space(source)


def compare_result_files(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the two result files hold the same answer: numbers within 1e-6 relative, else equal stripped text."""
    got, want = read_text(result), read_text(expected)
    if got is None or want is None:
        return 0.0
    try:
        a, b = float(got.strip()), float(want.strip())
        return score(abs(a - b) <= 1e-6 * max(1.0, abs(b)))
    except ValueError:
        return score(got.strip() == want.strip())


def is_in_vm_clickboard(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the clipboard text holds every expected string; the task file swaps result/expected, so the
    rule dict and the clipboard text are told apart by type."""
    rules, clipboard = (result, expected) if isinstance(result, Mapping) else (expected, result)
    if clipboard is None or rules is None:
        return 0.0
    return score(all(str(item) in str(clipboard) for item in as_list(rules_value(rules))))


METRICS = {
    "exact_match": exact_match,
    "literal_match": literal_match,
    "fuzzy_match": fuzzy_match,
    "is_in_list": is_in_list,
    "check_include_exclude": check_include_exclude,
    "check_direct_json_object": check_direct_json_object,
    "check_list": check_list,
    "compare_text_file": compare_text_file,
    "diff_text_file": diff_text_file,
    "compare_config": compare_config,
    "file_contains": file_contains,
    "check_line_number": check_line_number,
    "check_json_settings": check_json_settings,
    "check_json_keybindings": check_json_keybindings,
    "check_json": check_json,
    "check_csv": check_csv,
    "compare_csv": compare_csv,
    "compare_python_pure_text": compare_python_pure_text,
    "compare_result_files": compare_result_files,
    "is_in_vm_clickboard": is_in_vm_clickboard,
}

"""Scoring side: GAIA's official quasi-exact-match scorer, and extraction of the answer from model text.

`score_answer` follows the published rules exactly, including their odd corners, because a
leaderboard number is only comparable if every harness scores the same way:

* the ground truth decides the rule (number, then list, then string);
* "1,700" as ground truth is a two-element list, not a number;
* "$17" and "17%" match 17, but "17 km" does not (units are never stripped);
* a prediction that cannot be parsed as a number becomes +inf, so a ground truth of "inf"
  matches any unparseable prediction, and "nan" never matches anything.
"""

from __future__ import annotations

import re
import string
from typing import Any

__all__ = ["score_answer", "extract_final_answer", "normalize_number", "normalize_text", "split_list"]

_PUNCTUATION_TABLE = str.maketrans("", "", string.punctuation)
_WHITESPACE = re.compile(r"\s")
_LIST_SEPARATORS = re.compile(r"[,;]")


def _parses_as_float(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def normalize_number(value: str) -> float:
    """Drop every `$`, `%` and `,` and parse with `float()`; anything unparseable is +inf."""
    for char in "$%,":
        value = value.replace(char, "")
    try:
        return float(value)
    except ValueError:
        return float("inf")


def normalize_text(value: str, *, remove_punctuation: bool = True) -> str:
    """Remove all whitespace, lower-case, and (optionally) drop ASCII punctuation."""
    squashed = _WHITESPACE.sub("", value).lower()
    return squashed.translate(_PUNCTUATION_TABLE) if remove_punctuation else squashed


def split_list(value: str) -> list[str]:
    """Split on every `,` and `;` (no quoting, empty elements kept)."""
    return _LIST_SEPARATORS.split(value)


def _number_matches(prediction: str, truth: str) -> bool:
    return normalize_number(prediction) == float(truth)


def score_answer(prediction: Any, truth: str) -> bool:
    """True when `prediction` matches the GAIA ground truth `truth` under the official rules.

    The prediction is cast to `str` (None becomes ""). `truth` must be a real label: test-split
    rows carry "?" and must not be scored (the caller counts them as unlabeled instead).
    """
    if truth is None:
        raise ValueError("cannot score against a missing ground truth (unlabeled row)")
    prediction = "" if prediction is None else str(prediction)
    truth = str(truth)

    if _parses_as_float(truth):
        return _number_matches(prediction, truth)

    if "," in truth or ";" in truth:
        truth_items = split_list(truth)
        predicted_items = split_list(prediction)
        if len(truth_items) != len(predicted_items):
            return False
        for predicted, expected in zip(predicted_items, truth_items):
            if _parses_as_float(expected):
                if not _number_matches(predicted, expected):
                    return False
            elif normalize_text(predicted, remove_punctuation=False) != normalize_text(
                expected, remove_punctuation=False
            ):
                return False
        return True

    return normalize_text(prediction) == normalize_text(truth)


# `FINAL ANSWER` + optional markdown emphasis + `:` (case-insensitive, so "Final answer:" works).
_MARKER = re.compile(r"final[ \t]+answer[ \t]*(?:\*\*|__)?[ \t]*:[ \t]*(?:\*\*|__)?", re.IGNORECASE)
_WRAPPERS = ("**", "__", "`")


def _unwrap(answer: str) -> str:
    """Strip one layer of markdown wrapping that encloses the whole answer (`**42**`, `` `42` ``)."""
    answer = answer.strip()
    for wrapper in _WRAPPERS:
        if len(answer) > 2 * len(wrapper) and answer.startswith(wrapper) and answer.endswith(wrapper):
            return answer[len(wrapper) : -len(wrapper)].strip()
    if answer.endswith("**") and "**" not in answer[:-2]:  # closing bold of "**FINAL ANSWER: 42**"
        return answer[:-2].strip()
    return answer


def extract_final_answer(text: str | None) -> str | None:
    """The answer after the last `FINAL ANSWER:` marker, or None when the text has none.

    Rules (chosen so a model that thinks aloud and then answers is read correctly):
    the marker is case-insensitive and may be bolded; the **last** occurrence wins; the answer is
    the rest of that line, stripped; if that rest is empty, the next non-empty line is used; a
    markdown wrapper around the whole answer is removed. A marker with nothing after it gives "".
    """
    if not text:
        return None
    matches = list(_MARKER.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end() :]
    line, _, following = rest.partition("\n")
    if not line.strip():
        line = next((candidate for candidate in following.splitlines() if candidate.strip()), "")
    return _unwrap(line)

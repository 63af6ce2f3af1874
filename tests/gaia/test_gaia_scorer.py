"""The official GAIA scoring rules, case by case, and FINAL ANSWER extraction."""

from __future__ import annotations

import pytest

from qitos.benchmark.gaia import extract_final_answer, score_answer
from qitos.benchmark.gaia.scorer import normalize_number, normalize_text, split_list

NUMBER_CASES = [
    ("17", "17", True),
    ("17.0", "17", True),
    ("$17", "17", True),  # spec: "$17" matches 17
    ("17%", "17", True),
    ("1,700", "1700", True),  # commas vanish in a predicted number
    ("$1,234.50", "1234.5", True),
    ("17 km", "17", False),  # spec: units fail
    ("seventeen", "17", False),
    ("1 700", "1700", False),  # inner spaces are not stripped
    (" 17\n", "17", True),  # float() ignores surrounding whitespace
    ("17.5", "17", False),
    ("17.000001", "17", False),
    (17, "17", True),  # cast to str first
    (17.0, "17", True),
    (None, "0", False),  # None -> "" -> +inf
    ("1e3", "1000", True),
    ("-3", "-3", True),
    ("+3", "3", True),
    ("€17", "17", False),  # only $ % , are removed
    ("0.1", "0.10", True),
    ("17,", "17", True),
    ("1_000", "1000", True),  # Python float() accepts underscores
    ("$$1,,0%", "10", True),  # every occurrence is removed
    ("anything at all", "inf", True),  # unparseable prediction becomes +inf
    ("inf", "inf", True),
    ("-inf", "inf", False),
    ("nan", "nan", False),  # nan never equals itself
    ("12", "nan", False),
    ("17", "$17", True),  # "$17" is not a float: the string rule applies
]

LIST_CASES = [
    ("1,700", "1,700", True),
    ("1700", "1,700", False),  # spec: "1,700" as ground truth is a two-element list
    ("1, 700", "1,700", True),
    ("a, b, c", "a, b, c", True),
    ("c, b, a", "a, b, c", False),  # order matters
    ("a, b", "a, b, c", False),  # lengths differ
    ("a, b, c, d", "a, b, c", False),
    ("a; b", "a, b", True),  # both separators split
    ("1;2;3", "1, 2, 3", True),
    ("A,B", "a, b", True),  # case and whitespace ignored
    ("KestrelBay, amberfield", "Kestrel Bay, Amberfield", True),
    ("a., b", "a, b", False),  # punctuation is kept inside list items
    ("3, $4", "3, 4", True),  # number rule per numeric item
    ("3, 4 apples", "3, 4", False),
    ("a, 2", "a, 2.0", True),
    ("a,,b", "a, , b", True),  # empty items compare as empty strings
    ("x, y, z", '"x, y", z', False),  # no quote handling: '"x' != 'x'
    (None, "a, b", False),
    ("", "a, b", False),
]

STRING_CASES = [
    ("Borealis", "borealis", True),
    ("PortEmmer", "Port Emmer", True),  # whitespace removed
    ("Port-Emmer.", "Port Emmer", True),  # ASCII punctuation removed
    ("The Port Emmer", "Port Emmer", False),  # articles are kept
    ("café", "cafe", False),  # non-ASCII letters kept
    ("«Paris»", "Paris", False),  # non-ASCII punctuation kept
    ("St. Petersburg", "Saint Petersburg", False),
    ("Mira\tSolberg\n", "mira solberg", True),
    ("It's", "its", True),
    ("152", "1.5.2", True),  # "1.5.2" is no float; its dots are punctuation
    (None, "None", False),  # None becomes "", not "None"
    ("", "right", False),
    ("rightt", "right", False),
]


@pytest.mark.parametrize("prediction,truth,expected", NUMBER_CASES + LIST_CASES + STRING_CASES)
def test_score_answer(prediction: object, truth: str, expected: bool) -> None:
    assert score_answer(prediction, truth) is expected


def test_missing_truth_is_refused() -> None:
    with pytest.raises(ValueError, match="unlabeled"):
        score_answer("42", None)  # type: ignore[arg-type]


def test_helpers() -> None:
    assert normalize_number("$1,2%") == 12.0
    assert normalize_number("12 km") == float("inf")
    assert normalize_text(" A.b C ") == "abc"
    assert normalize_text(" A.b C ", remove_punctuation=False) == "a.bc"
    assert split_list("a,b;c,,") == ["a", "b", "c", "", ""]


EXTRACTION_CASES = [
    ("FINAL ANSWER: 42", "42"),
    ("thinking...\nFINAL ANSWER: 42\n", "42"),
    ("FINAL ANSWER: 1\nwait, that's wrong.\nFINAL ANSWER: 2", "2"),  # last occurrence wins
    ("Final answer: Paris", "Paris"),  # case-insensitive
    ("**FINAL ANSWER:** 42", "42"),
    ("**FINAL ANSWER**: 42", "42"),
    ("**FINAL ANSWER: 42**", "42"),
    ("FINAL ANSWER: **42**", "42"),
    ("FINAL ANSWER: `42`", "42"),
    ("FINAL ANSWER : 42", "42"),
    ("FINAL ANSWER: 42\r\n", "42"),
    ("FINAL ANSWER: 10:30", "10:30"),
    ("FINAL ANSWER: a, b, c", "a, b, c"),
    ("FINAL ANSWER: 42\nBecause the table says so.", "42"),  # only the rest of that line
    ("FINAL ANSWER:\n\n  Port Emmer  \nmore", "Port Emmer"),  # empty rest -> next non-empty line
    ("FINAL ANSWER:", ""),
    ("Use the template FINAL ANSWER: [YOUR FINAL ANSWER].\nFINAL ANSWER: 7", "7"),
    ("FINAL ANSWER: FINAL ANSWER: 3", "3"),
]


@pytest.mark.parametrize("text,expected", EXTRACTION_CASES)
def test_extract_final_answer(text: str, expected: str) -> None:
    assert extract_final_answer(text) == expected


@pytest.mark.parametrize("text", [None, "", "The answer is 42.", "FINALANSWER 42", "final answers are hard"])
def test_extract_without_marker(text: str | None) -> None:
    assert extract_final_answer(text) is None


def test_extracted_answer_scores() -> None:
    reply = "The total is $1,234.50 according to the PDF.\nFINAL ANSWER: $1,234.50"
    assert score_answer(extract_final_answer(reply), "1234.5")
    assert not score_answer(extract_final_answer("no marker here"), "1234.5")

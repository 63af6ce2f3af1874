"""Evaluator dispatch as upstream's DesktopEnv.evaluate, with upstream's own getters and metrics, against a test VM
on loopback: infeasible/FAIL, options, missing results, and/or over lists of metrics, postconfig; plus the loader:
isolation, lazy optional packages, a checkout that lacks a metric."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from osworld_vm_controller import VMController

from qitos.benchmark.osworld import OSWorldTask, evaluate, load_evaluators


def task(evaluator: dict[str, Any]) -> OSWorldTask:
    return OSWorldTask.model_validate({"id": "t", "domain": "os", "snapshot": "os", "instruction": "x",
                                       "evaluator": evaluator})


def echo(text: str) -> dict[str, Any]:
    return {"type": "vm_command_line", "command": ["echo", "-n", text]}


def rule(value: Any) -> dict[str, Any]:
    return {"type": "rule", "rules": {"expected": value}}


def executed(controller: VMController) -> list[Any]:
    import json

    lines = (controller.root / "requests.log").read_text().splitlines()
    return [entry["body"]["command"] for entry in map(json.loads, lines) if entry["path"] == "/execute"]


def test_infeasible_scores_on_last_action(upstream, vm) -> None:
    _, provider = vm
    t = task({"func": "infeasible"})
    assert evaluate(t, upstream, provider, "FAIL").score == 1.0
    assert evaluate(t, upstream, provider, {"action_type": "FAIL"}).score == 0.0  # upstream: only the string
    outcome = evaluate(t, upstream, provider, "DONE")
    assert (outcome.status, outcome.score) == ("scored", 0.0)


def test_fail_on_a_feasible_task_scores_zero_without_reading_state(upstream, vm) -> None:
    controller, provider = vm
    t = task({"func": "exact_match", "result": echo("a"), "expected": rule("a")})
    assert evaluate(t, upstream, provider, "DONE").score == 1.0
    outcome = evaluate(t, upstream, provider, "FAIL")
    assert (outcome.status, outcome.score) == ("scored", 0.0) and len(executed(controller)) == 1
    # a computer_13 dict FAIL is no FAIL upstream: the metric runs
    assert evaluate(t, upstream, provider, {"action_type": "FAIL"}).score == 1.0 and len(executed(controller)) == 2


def test_without_provider_requires_unavailable(upstream) -> None:
    outcome = evaluate(task({"func": "exact_match", "result": echo("a"), "expected": rule("a")}), upstream, None, "DONE")
    assert outcome.status == "requires_unavailable" and "QITOS_OSWORLD_CONTROLLER" in (outcome.reason or "")


class Gold:
    """A downloader over a dict (the gold files' offline mirror)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files, self.calls = files, []

    def fetch(self, url: str, dest: Path) -> Path:
        self.calls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(self.files[url])
        return dest


def test_options_gold_files_and_a_missing_result(upstream, vm, tmp_path) -> None:
    controller, provider = vm
    controller.place("/home/user/a.txt", b"Hello   World")
    gold = Gold({"https://gold/a": "hello world"})
    evaluator = {"func": "compare_text_file", "result": {"type": "vm_file", "path": "/home/user/a.txt", "dest": "a.txt"},
                 "expected": {"type": "cloud_file", "path": "https://gold/a", "dest": "a_gold.txt"}}
    assert evaluate(task(evaluator), upstream, provider, downloader=gold, cache_dir=tmp_path / "c1").score == 0.0
    with_options = {**evaluator, "options": {"ignore_blanks": True, "ignore_case": True}}
    assert evaluate(task(with_options), upstream, provider, downloader=gold, cache_dir=tmp_path / "c2").score == 1.0
    missing = {**with_options, "result": {"type": "vm_file", "path": "/home/user/none.txt", "dest": "none.txt"}}
    outcome = evaluate(task(missing), upstream, provider, downloader=gold, cache_dir=tmp_path / "c3")
    assert (outcome.status, outcome.score) == ("scored", 0.0)  # upstream's metric gets None and says 0
    assert gold.calls == ["https://gold/a"] * 3 and (tmp_path / "c2" / "a_gold.txt").read_text() == "hello world"


@pytest.mark.parametrize("conj, outputs, expected, score, ran", [
    ("and", ["a", "b", "c"], ["a", "x", "c"], 0.0, 2),  # and: stops at the first 0
    ("and", ["a", "b"], ["a", "b"], 1.0, 2),
    ("or", ["a", "b", "c"], ["x", "b", "c"], 1.0, 2),  # or: stops at the first 1
    ("or", ["a", "b"], ["x", "y"], 0.0, 2),
])
def test_lists_of_metrics_and_or(upstream, vm, conj, outputs, expected, score, ran) -> None:
    controller, provider = vm
    t = task({"func": ["exact_match"] * len(outputs), "conj": conj, "result": [echo(o) for o in outputs],
              "expected": [rule(e) for e in expected]})
    outcome = evaluate(t, upstream, provider, "DONE")
    assert (outcome.status, outcome.score) == ("scored", score)
    assert len(executed(controller)) == ran and [m.func for m in outcome.metrics] == ["exact_match"] * ran


def test_list_average_under_and(upstream, vm) -> None:
    controller, provider = vm
    controller.place("/home/user/a.txt", b"one two three")
    t = task({"func": ["exact_match", "fuzzy_match"], "result": [echo("a"), {"type": "vm_command_line",
              "command": ["cat", "/home/user/a.txt"]}], "expected": [rule("a"), rule("one two four")]})
    outcome = evaluate(t, upstream, provider, "DONE")
    partial = upstream.metric("fuzzy_match")("one two three", {"expected": "one two four"})
    assert 0 < partial < 1 and outcome.score == pytest.approx((1.0 + partial) / 2)


def test_postconfig_runs_before_the_getters_and_rejected_steps_are_noted(upstream, vm) -> None:
    controller, provider = vm
    t = task({"func": "exact_match", "result": {"type": "vm_command_line", "command": ["cat", "/home/user/note"]},
              "expected": rule("saved"),
              "postconfig": [{"type": "execute", "parameters": {"command": ["python", "-c",
                              "open('/home/user/note', 'w').write('saved')"]}},
                             {"type": "activate_window", "parameters": {"window_name": "Calc"}}]})
    controller.windows = {"Writer"}
    outcome = evaluate(t, upstream, provider, "DONE")
    assert (outcome.status, outcome.score) == ("scored", 1.0)  # upstream logs a rejected step and goes on
    assert len(outcome.notes) == 1 and "postconfig activate_window" in outcome.notes[0] and "404" in outcome.notes[0]


FAKE_METRICS = '''
import easyocr
from desktop_env.evaluators.metrics.helpers import normalise

def read_text(result, expected):
    return 1.0 if normalise(easyocr.Reader(["en"]).readtext(result)) == expected else 0.0

def exact(result, expected):
    return 1.0 if normalise(result) == expected["expected"] else 0.0
'''


def fake_checkout(root: Path, metrics: str) -> Path:
    """An OSWorld checkout with one getter module and one metrics module, imported as upstream's are."""
    evaluators = root / "desktop_env" / "evaluators"
    (evaluators / "getters").mkdir(parents=True)
    (evaluators / "metrics").mkdir()
    (evaluators / "__init__.py").write_text("")
    (evaluators / "getters" / "__init__.py").write_text("def get_rule(env, config):\n    return config['rules']\n")
    (evaluators / "metrics" / "helpers.py").write_text("def normalise(text):\n    return text.strip().lower()\n")
    (evaluators / "metrics" / "__init__.py").write_text(textwrap.dedent(metrics))
    return root


def test_a_missing_optional_package_is_requires_unavailable_naming_it(tmp_path, upstream, vm) -> None:
    assert "easyocr" not in sys.modules  # deliberately not in the test extra
    _, provider = vm
    fake = load_evaluators(fake_checkout(tmp_path / "checkout", FAKE_METRICS))
    assert fake.namespace != upstream.namespace and "desktop_env" not in sys.modules and "easyocr" not in sys.modules
    assert fake.needs_packages(fake.metric("read_text")) == {"easyocr"} and not fake.needs_packages(fake.metric("exact"))
    ocr = task({"func": "read_text", "result": rule("x"), "expected": rule("x")})
    outcome = evaluate(ocr, fake, provider, "DONE")
    assert outcome.status == "requires_unavailable" and "'easyocr'" in (outcome.reason or "")
    plain = task({"func": "exact", "result": {"type": "rule", "rules": " Yes "}, "expected": rule("yes")})
    assert evaluate(plain, fake, provider, "DONE").score == 1.0  # the same checkout scores what it can
    absent = evaluate(task({"func": "nope", "result": rule("x")}), fake, provider, "DONE")
    assert absent.status == "unsupported" and "['nope']" in (absent.reason or "")

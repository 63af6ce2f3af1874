"""Evaluator dispatch: infeasible/FAIL logic, conj and/or, getters, missing results, unsupported outcomes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.osworld import (
    LocalFilesProvider,
    OSWorldTask,
    coverage_report,
    evaluate,
    implemented_metrics,
    load_tasks,
)
from qitos.benchmark.osworld.errors import TaskFormatError
from qitos.benchmark.osworld.provider import _NATIVE
from qitos.benchmark.osworld.relative_time import relative_time_rules, resolve_phrase


def task(evaluator: dict[str, Any], config: list | None = None) -> OSWorldTask:
    return OSWorldTask.model_validate({
        "id": "t", "domain": "os", "snapshot": "os", "instruction": "x", "config": config or [], "evaluator": evaluator,
    })


def vm_file(path: str) -> dict[str, Any]:
    return {"type": "vm_file", "path": path, "dest": Path(path).name}


def rule(value: Any) -> dict[str, Any]:
    return {"type": "rule", "rules": value}


@pytest.fixture
def vm(tmp_path: Path):
    """A LocalFilesProvider whose desktop files live under tmp_path/vm."""
    root = tmp_path / "vm"

    def make(files: dict[str, str], commands: dict[str, str] | None = None, states: dict | None = None) -> LocalFilesProvider:
        for vm_path, text in files.items():
            local = root / vm_path.lstrip("/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(text)
        return LocalFilesProvider(root, commands, states)

    return make


class FakeDownloader:
    def __init__(self, files: dict[str, str]) -> None:
        self.files, self.calls = files, []

    def fetch(self, url: str, dest: Path) -> Path:
        self.calls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(self.files[url])
        return dest


def test_infeasible_scores_on_last_action() -> None:
    t = task({"func": "infeasible"})
    assert evaluate(t, None, "FAIL").score == 1.0
    assert evaluate(t, None, {"action_type": "FAIL"}).score == 1.0
    assert evaluate(t, None, ["WAIT", "FAIL"]).score == 1.0
    outcome = evaluate(t, None, "DONE")
    assert (outcome.status, outcome.score) == ("scored", 0.0)


def test_final_fail_on_feasible_task_scores_zero(vm) -> None:
    t = task({"func": "exact_match", "result": {"type": "vm_command_line", "command": "ls"}, "expected": rule({"expected": "a\n"})})
    provider = vm({}, {"ls": "a\n"})
    assert evaluate(t, provider, "DONE", run_postconfig=False).score == 1.0
    outcome = evaluate(t, provider, {"action_type": "FAIL"}, run_postconfig=False)
    assert (outcome.status, outcome.score) == ("scored", 0.0)


def test_without_provider_requires_unavailable() -> None:
    t = task({"func": "exact_match", "result": {"type": "vm_command_line", "command": "ls"}, "expected": rule({"expected": "a"})})
    outcome = evaluate(t, None, "DONE")
    assert outcome.status == "requires_unavailable"
    assert "QITOS_OSWORLD_CONTROLLER" in (outcome.reason or "")


def test_options_are_keyword_arguments_and_missing_result_scores_zero(vm) -> None:
    provider = vm({"/home/user/a.txt": "Hello   World"}, )
    downloader = FakeDownloader({"https://gold/a": "hello world"})
    evaluator = {"func": "compare_text_file", "result": vm_file("/home/user/a.txt"),
                 "expected": {"type": "cloud_file", "path": "https://gold/a", "dest": "a_gold.txt"}}
    assert evaluate(task(evaluator), provider, downloader=downloader).score == 0.0
    with_options = {**evaluator, "options": {"ignore_blanks": True, "ignore_case": True}}
    assert evaluate(task(with_options), provider, downloader=downloader).score == 1.0
    missing = evaluate(task({**with_options, "result": vm_file("/home/user/none.txt")}), provider, downloader=downloader)
    assert (missing.status, missing.score) == ("scored", 0.0)
    assert "result missing" in (missing.metrics[0].note or "")


class CountingProvider(LocalFilesProvider):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[Any] = []

    def run_command(self, command, shell=False):
        self.commands.append(command)
        return super().run_command(command, shell)


def _commands_task(conj: str, outputs: list[str], expected: list[str], func: str = "exact_match") -> OSWorldTask:
    return task({
        "func": [func] * len(outputs), "conj": conj,
        "result": [{"type": "vm_command_line", "command": f"c{i}"} for i in range(len(outputs))],
        "expected": [rule({"expected": e}) for e in expected],
    })


def test_conj_and_stops_at_first_zero_else_averages(tmp_path: Path) -> None:
    provider = CountingProvider(tmp_path, {"c0": "x", "c1": "y", "c2": "z"})
    outcome = evaluate(_commands_task("and", ["x", "y", "z"], ["nope", "y", "z"]), provider)
    assert outcome.score == 0.0 and provider.commands == ["c0"]
    graded = evaluate(_commands_task("and", ["x", "y"], ["x", "yy"], func="fuzzy_match"), provider)
    assert graded.score == pytest.approx((1.0 + 2 / 3) / 2)


def test_conj_or_stops_at_first_one_else_max(tmp_path: Path) -> None:
    provider = CountingProvider(tmp_path, {"c0": "x", "c1": "y", "c2": "z"})
    outcome = evaluate(_commands_task("or", ["x", "y", "z"], ["no", "y", "z"]), provider)
    assert outcome.score == 1.0 and provider.commands == ["c0", "c1"]
    graded = evaluate(_commands_task("or", ["x", "y"], ["xx", "q"], func="fuzzy_match"), provider)
    assert graded.score == pytest.approx(2 / 3)


def test_unsupported_metric_and_getter_are_reported(vm) -> None:
    provider = vm({})
    unknown_metric = evaluate(task({"func": "compare_videos", "result": vm_file("/a.mp4")}), provider)
    assert unknown_metric.status == "unsupported" and "compare_videos" in (unknown_metric.reason or "")
    html = {"type": "active_tab_html_parse", "category": "class"}
    unknown_getter = evaluate(task({"func": "check_direct_json_object", "result": html, "expected": rule({"expected": {}})}), provider)
    assert unknown_getter.status == "unsupported"
    assert "unsupported getter" in (unknown_getter.reason or "") and "active_tab_html_parse" in (unknown_getter.reason or "")


def test_metric_crash_is_an_error_not_a_zero(vm) -> None:
    provider = vm({"/x.xlsx": "not a workbook"})
    bad_rule = {"func": "compare_table", "result": vm_file("/x.xlsx"), "options": {"rules": [{"type": "check_cell", "sheet_idx": 0}]}}
    outcome = evaluate(task(bad_rule), provider)
    assert outcome.status == "scored" and outcome.score == 0.0  # unreadable workbook is a failed result
    crash = {"func": "check_json", "result": vm_file("/j.json"), "expected": rule({"expect": [{"key": ["a"], "method": "teleport"}]})}
    (Path(provider.root) / "j.json").write_text('{"a": 1}')
    outcome = evaluate(task(crash), provider)
    assert outcome.status == "error" and "unknown match method" in (outcome.reason or "")


def test_multi_and_gives_and_cache_file(vm, tmp_path: Path) -> None:
    provider = vm({"/home/user/a.txt": "A", "/home/user/b.txt": "B"})
    downloader = FakeDownloader({"u1": "A", "u2": "B"})
    evaluator = {"func": "compare_text_file",
                 "result": {"type": "vm_file", "path": ["/home/user/a.txt", "/home/user/b.txt"], "dest": ["a.txt", "b.txt"], "multi": "true"},
                 "expected": {"type": "cloud_file", "path": ["u1", "u2"], "dest": ["a_g.txt", "b_g.txt"], "multi": True}}
    cache = tmp_path / "cache"
    assert evaluate(task(evaluator), provider, downloader=downloader, cache_dir=cache).score == 1.0
    assert (cache / "b.txt").read_text() == "B" and downloader.calls == ["u1", "u2"]
    second = {**evaluator, "result": {**evaluator["result"], "gives": [1]}}
    assert evaluate(task(second), provider, downloader=downloader, cache_dir=cache).score == 0.0
    (cache / "grep.out").write_text("org.openoffice.languagetool.oxt\n")
    listing = {"func": "check_list", "result": {"type": "cache_file", "path": "grep.out"},
               "expected": rule({"expect": [r"languagetool\.oxt"]})}
    assert evaluate(task(listing), provider, cache_dir=cache).score == 1.0


def test_relative_time_rules() -> None:
    monday = dt.date(2024, 1, 1)
    assert resolve_phrase("tomorrow", monday) == dt.date(2024, 1, 2)
    assert resolve_phrase("next Monday", monday) == dt.date(2024, 1, 8)
    assert resolve_phrase("this Saturday", monday) == dt.date(2024, 1, 6)
    assert resolve_phrase("10th next month", dt.date(2024, 1, 31)) == dt.date(2024, 2, 10)
    assert resolve_phrase("first monday four months later", monday) == dt.date(2024, 5, 6)
    assert resolve_phrase("this month", monday) == dt.date(2024, 1, 1)
    with pytest.raises(TaskFormatError, match="unsupported relative time phrase"):
        resolve_phrase("the day after the party", monday)
    rules = {"relativeTime": {"from": "next Monday", "to": "next Friday"},
             "expected": {"from": "{DoW}, {DayD} {Month} {Year}", "to": "{Year}-{Month0D}-{Day0D}", "m": "{month}-weather"}}
    filled = relative_time_rules(rules, monday)["expected"]
    assert filled == {"from": "Mon, 8 Jan 2024", "to": "2024-01-05", "m": "january-weather"}


def test_relative_time_getter_in_evaluation(vm) -> None:
    provider = vm({}, states={"vm_screen_size": {"time": "2024-01-02"}})
    evaluator = {"func": "check_direct_json_object", "result": {"type": "vm_screen_size"},
                 "expected": {"type": "rule_relativeTime", "rules": {"relativeTime": {"from": "tomorrow"}, "expected": {"time": "{Year}-{Month0D}-{Day0D}"}}}}
    assert evaluate(task(evaluator), provider, today=dt.date(2024, 1, 1)).score == 1.0
    assert evaluate(task(evaluator), provider, today=dt.date(2024, 1, 5)).score == 0.0


def test_real_tasks_score_offline(osworld_data: Path, vm) -> None:
    """Data tasks scored on files as they would be pulled from the VM (postconfig already ran)."""
    (settings_task,) = load_tasks(osworld_data, ids=["vs_code/9439a27b-18ae-42d8-9778-5f68f891805e"])
    settings = "/home/user/.config/Code/User/settings.json"
    good = vm({settings: json.dumps({"debug.focusEditorOnBreak": False})})
    assert evaluate(settings_task, good, "DONE", run_postconfig=False).score == 1.0
    bad = vm({settings: json.dumps({"debug.focusEditorOnBreak": True})})
    assert evaluate(settings_task, bad, "DONE", run_postconfig=False).score == 0.0
    (prefs_task,) = load_tasks(osworld_data, ids=["osworld-thunderbird-c9e7eaf2-b1a1-4efc-a982-721972fa9f02"])
    prefs = vm({"/home/user/.thunderbird/t5q2a5hp.default-release/prefs.js":
                'user_pref("mail.server.default.applyIncomingFilters", true);\nuser_pref("mail.imap.use_status_for_biff", false);\n'})
    assert evaluate(prefs_task, prefs, "DONE", run_postconfig=False).score == 1.0


def test_coverage_report_meets_target(osworld_data: Path) -> None:
    report = coverage_report(load_tasks(osworld_data), native_getters=_NATIVE)
    assert report.total_tasks == 369
    assert report.metric_share >= 0.6
    assert report.getter_share >= 0.6
    assert "compare_table" in report.implemented_metrics and "compare_pptx_files" in report.implemented_metrics
    assert set(report.implemented_metrics) == set(implemented_metrics())
    assert "infeasible" not in report.missing_metrics

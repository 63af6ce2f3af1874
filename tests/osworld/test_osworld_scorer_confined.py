"""Upstream's metrics run in a confined scorer process (`scorer.py`), not in the scoring process.

Red team, with upstream's own metrics on files and values from a test VM on loopback:
- `check_python_file_by_test_suite` imports the agent's Python: it tries the results file, another task's gold, the
  data dir's task files, the task's cache dir, a write outside and the network. Run in the scoring process
  (`confined=False`, what QitOS did before) it reaches all of them; confined it reaches none, and the score is what
  upstream's metric gives on that content (1.0 when it reached nothing). An honest suite scores the same both ways.
- What one metric call runs (the agent's Python writing the next metric's gold file) does not reach the next call:
  each gets a fresh sandbox and a fresh copy of the evaluation's files.
- `check_gnome_favorite_apps` `eval`s the gsettings string the agent can set: confined, the escape's command runs
  where it can write nothing of the host, and reading the results file fails with the metric's own error.
A `qit bench run` row says where its metrics ran (`scorer_isolated`); without bubblewrap the run is not official.
Limits: a metric that spins or eats memory is stopped and the evaluation ends `error` naming the limit; an answer
that is not a score in [0, 1] is named, never believed.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from osworld_fake_controller import FakeController
from tests.conftest import require_system
from tests.osworld.test_osworld_evaluator import fake_checkout

from qitos.benchmark.base import LoadOptions
from qitos.run.config import ModelConfig, RunConfig
from qitos.benchmark.osworld import OSWorldTask, evaluate, load_evaluators
from qitos.benchmark.osworld.scorer import ScorerLimits, scorer_isolation
from qitos.run.runner import execute_batch, plan_batch
from qitos.sandbox.bwrap import BwrapSandbox
from qitos.spec.official import RunFacts, official_checks
from qitos.spec.run_spec import RunSpec


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    ok, why = BwrapSandbox.available()
    require_system(ok, f"bubblewrap for the scorer ({why})")

SUITE = '''
import os, sys

def test():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import {module}
    return {module}.reached() == []
'''

HOSTILE = '''
import os, socket
FOUND = {{}}

def _try(name, action):
    try:
        FOUND[name] = repr(action())[:200]
    except Exception:
        FOUND[name] = None

_try("results file", lambda: open({results!r}).read())
_try("another task's gold", lambda: open({gold!r}).read())
_try("the data dir's task files", lambda: os.listdir({tasks!r}))
_try("the task's cache dir", lambda: os.listdir({cache!r}))
_try("a write outside", lambda: open({outside!r}, "w").write("pwned"))
_try("the network", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3).close())

def reached():
    return sorted(name for name, seen in FOUND.items() if seen is not None)
'''


def task(evaluator: dict[str, Any]) -> OSWorldTask:
    return OSWorldTask.model_validate({"id": "t", "domain": "os", "snapshot": "os", "instruction": "x",
                                       "evaluator": evaluator})


class Gold:
    """The task's gold files, as the cached downloader hands them over."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def fetch(self, url: str, dest: Path) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(self.files[url])
        return dest


def suite_task(module: str) -> OSWorldTask:
    """As multi_apps/26150609: the agent's files from the VM, the test suite a gold file beside them."""
    return task({"func": "check_python_file_by_test_suite",
                 "result": {"type": "vm_file", "path": [f"/home/user/snake/{module}.py", "/home/user/snake/x.txt"],
                            "dest": [f"{module}.py", "x.txt"], "multi": True},
                 "expected": {"type": "cloud_file", "path": f"https://gold/{module}", "dest": "test_suite.py"}})


def test_agent_python_run_by_a_metric_reaches_nothing(tmp_path: Path, upstream, vm, osworld_data: Path) -> None:
    controller, provider = vm
    results, gold, outside = tmp_path / "results.jsonl", tmp_path / "gold" / "other-task.json", tmp_path / "pwned.txt"
    results.write_text('{"task_id": "a", "success": true}\n')
    gold.parent.mkdir()
    gold.write_text('{"expected": "the answer"}')
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "setup-input.xlsx").write_bytes(b"a setup download")  # in the task's cache before scoring: not copied
    port = int(controller.url.rsplit(":", 1)[1])
    controller.place("/home/user/snake/probe.py", HOSTILE.format(
        results=str(results), gold=str(gold), tasks=str(osworld_data / "evaluation_examples"), cache=str(cache),
        outside=str(outside), port=port).encode())
    controller.place("/home/user/snake/x.txt", b"beside it")
    downloader = Gold({"https://gold/probe": SUITE.format(module="probe")})

    confined = evaluate(suite_task("probe"), upstream, provider, "DONE", downloader=downloader, cache_dir=cache)
    assert (confined.status, confined.score) == ("scored", 1.0), confined  # test() saw reached() == []
    assert not outside.exists()

    open_ = evaluate(suite_task("probe"), upstream, provider, "DONE", downloader=downloader,
                     cache_dir=tmp_path / "cache2", confined=False)
    assert (open_.status, open_.score) == ("scored", 0.0)
    reached = sys.modules["probe"].reached()  # the same probes, run in this process: they do reach
    assert {"results file", "another task's gold", "the data dir's task files", "a write outside",
            "the network"} <= set(reached), reached
    assert outside.read_text() == "pwned"


TAMPER = '''
import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gold.txt"), "w").write("forged\\n")

def reached():
    return []
'''


def test_what_one_metric_call_runs_does_not_reach_the_next(tmp_path: Path, upstream, vm) -> None:
    """The agent's Python, run by the first metric, writes the second metric's gold file beside itself."""
    controller, provider = vm
    controller.place("/home/user/snake/tamper.py", TAMPER.encode())
    controller.place("/home/user/snake/x.txt", b"beside it")
    controller.place("/home/user/answer.txt", b"forged\n")
    suite = suite_task("tamper").evaluator.model_dump(mode="json", exclude_unset=True)
    evaluator = {"func": [suite["func"], "compare_text_file"], "conj": "and",
                 "result": [suite["result"], {"type": "vm_file", "path": "/home/user/answer.txt", "dest": "answer.txt"}],
                 "expected": [suite["expected"], {"type": "cloud_file", "path": "https://gold/text", "dest": "gold.txt"}]}
    downloader = Gold({"https://gold/tamper": SUITE.format(module="tamper"), "https://gold/text": "the answer\n"})
    scores = [evaluate(task(evaluator), upstream, provider, "DONE", downloader=downloader,
                       cache_dir=tmp_path / f"c{confined}", confined=confined).score for confined in (True, False)]
    assert scores == [0.0, 1.0]  # in the scoring process the forged gold stands (the real one is never fetched)


@pytest.mark.parametrize("verdict, score", [("[]", 1.0), ("['something']", 0.0)])
def test_an_honest_suite_scores_as_in_the_scoring_process(tmp_path: Path, upstream, vm, verdict: str,
                                                          score: float) -> None:
    controller, provider = vm
    module = f"honest_{int(score)}"
    controller.place(f"/home/user/snake/{module}.py", f"def reached():\n    return {verdict}\n".encode())
    controller.place("/home/user/snake/x.txt", b"beside it")
    downloader = Gold({f"https://gold/{module}": SUITE.format(module=module)})
    scores = [evaluate(suite_task(module), upstream, provider, "DONE", downloader=downloader,
                       cache_dir=tmp_path / f"c{confined}", confined=confined).score for confined in (True, False)]
    assert scores == [score, score]


def test_gsettings_eval_escape_writes_and_reads_nothing(tmp_path: Path, upstream, vm) -> None:
    controller, provider = vm
    results, outside = tmp_path / "results.jsonl", tmp_path / "escaped.txt"
    results.write_text("secret rows\n")
    favourites = {"func": "check_gnome_favorite_apps",
                  "result": {"type": "vm_command_line", "command": ["cat", "/home/user/apps"]},
                  "expected": {"type": "rule", "rules": {"expected": ["google-chrome.desktop"]}}}
    controller.place("/home/user/apps", (f"(__import__('os').system('echo pwned > {outside}'), "
                                         "['google-chrome.desktop'])[1]").encode())
    outcome = evaluate(task(favourites), upstream, provider, "DONE")
    assert (outcome.status, outcome.score) == ("scored", 1.0) and not outside.exists()  # upstream: 1 on this string
    controller.place("/home/user/apps", f"open({str(results)!r}).read()".encode())
    outcome = evaluate(task(favourites), upstream, provider, "DONE")
    assert outcome.status == "error" and outcome.reason.startswith("FileNotFoundError: ") \
        and "secret rows" not in outcome.reason


BAD_METRICS = '''
import os

def spin(result, expected):
    while True:
        pass

def hog(result, expected):
    blocks = []
    while True:
        blocks.append(bytearray(64 << 20))

def big(result, expected):
    return 7.5

def word(result, expected):
    return "yes"

def forged(result, expected):
    os.write(1, b'{"score": 1.0}\\n')
    return 0.0

def fine(result, expected):
    return 1.0 if result == expected["expected"] else 0.0
'''


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    root = fake_checkout(tmp_path_factory.mktemp("checkout"), "from .bad import spin, hog, big, word, forged, fine\n")
    (root / "desktop_env" / "evaluators" / "metrics" / "bad.py").write_text(textwrap.dedent(BAD_METRICS))
    return load_evaluators(root)


@pytest.mark.parametrize("func, status, reason", [
    ("spin", "error", "scorer: spin: the metric ran past the scorer's time limit (3 s)"),
    ("hog", "error", "scorer: hog: the metric reached the scorer's memory limit"),
    ("big", "error", "scorer: big: the scorer answered {'score': 7.5}, not a score in [0, 1]"),
    ("word", "error", "ValueError: could not convert string to float: 'yes'"),
    ("forged", "scored", None),
    ("fine", "scored", None),
])
def test_a_metric_past_a_limit_or_answering_no_score_fails_by_name(bad, vm, func, status, reason) -> None:
    _, provider = vm
    limits = ScorerLimits(seconds=3 if func == "spin" else 60, memory_bytes=256 << 20)
    t = task({"func": func, "result": {"type": "rule", "rules": "x"},
              "expected": {"type": "rule", "rules": {"expected": "x"}}})
    outcome = evaluate(t, bad, provider, "DONE", limits=limits)
    assert outcome.status == status and (reason is None or (outcome.reason or "").startswith(reason)), outcome
    if func in ("forged", "fine"):  # what a metric prints is not its answer
        assert outcome.score == (0.0 if func == "forged" else 1.0)
    if func == "word":  # named as in the scoring process
        open_ = evaluate(t, bad, provider, "DONE", confined=False)
        assert (open_.status, open_.reason) == (outcome.status, outcome.reason)


def test_scorer_isolated_is_an_official_check(monkeypatch) -> None:
    def check(facts: RunFacts):
        return {c.check: c for c in official_checks(RunSpec(benchmark_name="osworld"), None, (True, "ok"), facts)}

    assert "scorer_isolated" not in check(RunFacts())  # benchmarks whose scorer runs nothing the agent made
    assert scorer_isolation()[0] is True
    assert check(RunFacts(scorer_isolation=scorer_isolation()))["scorer_isolated"].passed
    monkeypatch.setattr(BwrapSandbox, "available", staticmethod(lambda: (False, "bubblewrap (`bwrap`) is missing")))
    failed = check(RunFacts(scorer_isolation=scorer_isolation()))["scorer_isolated"]
    assert not failed.passed and "bwrap" in failed.detail and "ran in the scoring process" in failed.detail


GSETTINGS = "osworld-os-bedcedc4-4d72-425e-ad62-21960b11fe0d"  # exact_match(gsettings idle-delay, "uint32 0\n")


def test_a_run_is_official_only_with_its_metrics_confined(osworld_data: Path, monkeypatch, tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    reply = {"thought": "next", "action": {"name": "computer", "arguments": {"action_type": "DONE"}}}
    script.write_text(json.dumps(json.dumps(reply)) + "\n")
    monkeypatch.setenv("QITOS_DATA_DIR", str(osworld_data.parent))
    found = {}
    with FakeController() as fake:
        fake.command_output = lambda command, shell: "uint32 0\n" if "gsettings" in command else ""
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        for bwrap in (True, False):
            if not bwrap:  # the agent side stays confined (its own probe); only the scorer cannot be
                monkeypatch.setattr(BwrapSandbox, "available", staticmethod(lambda: (False, "bwrap is not installed")))
            cfg = RunConfig(benchmark="osworld", recipe="react-computer-use",
                            load=LoadOptions(data_dir=osworld_data.parent, task_ids=[GSETTINGS],
                                             options={"sleep_after_execution": "0"}),
                            model=ModelConfig(model_name=f"scripted:{script}"),
                            output=tmp_path / f"{bwrap}" / "r.jsonl",
                            trace_logdir=tmp_path / f"{bwrap}" / "runs")
            (row,) = [r.model_dump(mode="json") for r in execute_batch(plan_batch(cfg)).rows]
            manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
            found[bwrap] = (row, {c["check"]: c for c in manifest["official_checks"]}, manifest["official_run"])
    (row, checks, official), (open_row, open_checks, open_official) = found[True], found[False]
    assert row["score"] == open_row["score"] == 1.0
    assert row["metadata"]["scorer"] == "bwrap" and checks["scorer_isolated"]["passed"]
    assert open_row["metadata"]["scorer"] == "scoring-process" and not open_checks["scorer_isolated"]["passed"]
    assert "bwrap is not installed" in open_checks["scorer_isolated"]["detail"]
    assert checks["agent_isolated"]["passed"] and open_checks["agent_isolated"]["passed"]
    assert [c for c, v in open_checks.items() if not v["passed"]] == [c for c, v in checks.items() if not v["passed"]] \
        + ["scorer_isolated"] and (official, open_official) == (all(v["passed"] for v in checks.values()), False)

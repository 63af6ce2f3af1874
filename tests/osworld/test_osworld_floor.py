"""OSWorld's do-nothing floor: the tasks where upstream's own `DesktopEnv.evaluate` gives 1 to an agent whose only
action is FAIL (the infeasible ones), shown by `qit bench eval` beside the rate, for a run without a VM and for
a run against the fake controller, where an agent that answers FAIL at once scores exactly the floor."""

from __future__ import annotations

import json
from pathlib import Path

from osworld_fake_controller import FakeController
from test_osworld_bench_cli import GSETTINGS, INFEASIBLE, qit, rows, write_script
from test_osworld_evaluate_differential import upstream_scores

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.osworld.adapter import OsworldAdapter
from qitos.benchmark.osworld.evaluator import raw_evaluator
from tests.support.openai_server import refused_port


def test_the_floor_is_what_upstream_scores_a_fail_at_once(osworld_data: Path, tmp_path: Path) -> None:
    adapter = OsworldAdapter()
    load = LoadOptions(data_dir=osworld_data.parent, split="test_all")
    tasks = adapter.load_tasks(load)
    floor = {t.id for t in tasks if adapter.do_nothing_success(t, load)}
    assert len(tasks) == 369 and len(floor) == 30
    # upstream's evaluate, action history ["FAIL"]: it answers before any getter (no VM is reached: nothing listens)
    batch = [(t.id, raw_evaluator(adapter.gold(t)), ["FAIL"]) for t in tasks]
    scores = upstream_scores(osworld_data, refused_port(), tmp_path / "cache", batch)
    assert {cid for cid, result in scores.items() if result.get("score") == 1.0} == floor
    assert all(result == {"score": 0.0} for cid, result in scores.items() if cid not in floor)
    small = LoadOptions(data_dir=osworld_data.parent, split="test_small")
    assert not any(adapter.do_nothing_success(t, small) for t in adapter.load_tasks(small))


def test_eval_shows_the_floor_of_a_run_without_a_vm(tmp_path: Path) -> None:
    """Nothing runs (no provider): every row is unscored, and the floor still covers every selected task."""
    done = qit("bench", "run", "--benchmark", "osworld", "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 369 and {r["stop_reason"] for r in out} == {"requires_unavailable"}
    assert sum(r["metadata"]["do_nothing_success"] for r in out) == 30
    report = json.loads(qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path).stdout)
    floor = report["groups"][0]["metrics"]["do_nothing_floor"]
    assert (floor["successes"], floor["selected"], floor["scored"]) == (30, 369, 0)
    table = qit("bench", "eval", "--input", "r.jsonl", cwd=tmp_path).stdout
    assert "do-nothing floor (all selected)" in table and "0.081   30/369" in table
    assert "do-nothing floor (scored only)" not in table  # nothing was scored


def test_fail_at_once_scores_the_floor_and_eval_says_so(tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.jsonl", [{"action_type": "FAIL"}])
    with FakeController() as fake:
        done = qit("bench", "run", "--benchmark", "osworld", "--recipe", "react-computer-use", "--task-ids",
                   f"{INFEASIBLE},{GSETTINGS}", "--model-name", f"scripted:{script}", "--option",
                   "sleep_after_execution=0", "--output", "r.jsonl", cwd=tmp_path, controller=fake.url)
    assert done.returncode == 0, done.stdout + done.stderr
    out = {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")}
    assert {t: (r["success"], r["metadata"]["do_nothing_success"]) for t, r in out.items()} == {
        INFEASIBLE: (True, True), GSETTINGS: (False, False)}
    table = qit("bench", "eval", "--input", "r.jsonl", cwd=tmp_path).stdout
    assert table.count("0.500   1/2") == 2  # the rate over all selected and over scored: both equal the floor

"""Tau-Bench's do-nothing floor: the tasks it names are the ones a real null agent scores 1 on (test_oracle's
NULL_AGENT_FLOOR, measured by running it), and `qit bench eval` shows it beside the rate, from rows alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.tau_bench.adapter import TauBenchAdapter
from tests.platform.conftest import qit, rows

from .test_oracle import NULL_AGENT_FLOOR, SPLITS


@pytest.mark.parametrize(("subset", "split"), SPLITS, ids=[f"{d}-{s}" for d, s in SPLITS])
def test_the_floor_names_exactly_the_null_agents_tasks(tau_data: Path, subset: str, split: str) -> None:
    load = LoadOptions(data_dir=tau_data.parent, subset=subset, split=split)
    adapter = TauBenchAdapter()
    floor = [int(t.metadata["task_index"]) for t in adapter.load_tasks(load) if adapter.do_nothing_success(t, load)]
    assert floor == NULL_AGENT_FLOOR[(subset, split)]


def eval_json(cwd: Path, path: str) -> dict:
    report = qit("bench", "eval", "--input", path, "--json", cwd=cwd)
    assert report.returncode == 0, report.stderr
    return json.loads(report.stdout)["groups"][0]["metrics"]


def test_eval_shows_the_floor_of_an_airline_run(tau_data: Path, tmp_path: Path) -> None:
    """The null agent (one "Hi", the scripted user stops) scores exactly the floor: 19 of 50."""
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    (tmp_path / "never.jsonl").write_text('"the null agent calls no model"\n')
    done = qit("bench", "run", "--benchmark", "tau-bench", "--subset", "airline", "--split", "test",
               "--runner", "tests.tau_bench.runners:say_hi", "--option", "user_strategy=scripted",
               "--model-name", f"scripted:{tmp_path / 'never.jsonl'}", "--concurrency", "2", "--output", "null.jsonl",
               "--trace-logdir", "runs",
               cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = rows(tmp_path / "null.jsonl")
    assert len(out) == 50 and all(isinstance(r["metadata"]["do_nothing_success"], bool) for r in out)
    assert {r["task_id"] for r in out if r["success"]} == {r["task_id"] for r in out
                                                         if r["metadata"]["do_nothing_success"]}
    m = eval_json(tmp_path, "null.jsonl")
    assert m["successes"] == 19 and m["do_nothing_floor"]["successes"] == 19 and m["do_nothing_floor"]["rate"] == 0.38
    table = qit("bench", "eval", "--input", "null.jsonl", cwd=tmp_path).stdout
    assert "do-nothing floor (all selected)" in table and "0.380   19/50" in table
    md = qit("bench", "export", "--input", "null.jsonl", "--format", "md", cwd=tmp_path).stdout
    assert "| do-nothing floor |" in md and "0.380 (19/50)" in md
    upstream = qit("bench", "export", "--input", "null.jsonl", "--format", "tau-bench", cwd=tmp_path).stdout
    assert len(json.loads(upstream)) == 50 and "do_nothing_success" not in upstream  # upstream's schema, untouched


def test_eval_of_a_partial_oracle_run_says_what_it_does_not_know(tau_data: Path, tmp_path: Path) -> None:
    """Retail test, oracle: every task scores 1 while the floor stays 7 of 115; a results file that lost rows
    of floor tasks shows a floor of at least what it knows, and how high it could be."""
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    done = qit("bench", "run", "--benchmark", "tau-bench", "--subset", "retail", "--split", "test", "--recipe", "oracle",
               "--concurrency", "2", "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    m = eval_json(tmp_path, "r.jsonl")
    assert m["successes"] == 115 and (m["do_nothing_floor"]["successes"], m["do_nothing_floor"]["selected"]) == (7, 115)
    kept = [line for line in (tmp_path / "r.jsonl").read_text().splitlines()
            if json.loads(line)["task_id"] not in ("tau_retail_test_00010", "tau_retail_test_00011")]
    (tmp_path / "partial.jsonl").write_text("\n".join(kept) + "\n")
    f = eval_json(tmp_path, "partial.jsonl")["do_nothing_floor"]
    assert (f["successes"], f["selected"], f["unknown"]) == (6, 115, 2)
    table = qit("bench", "eval", "--input", "partial.jsonl", cwd=tmp_path).stdout
    assert "≥ 0.052   6/115" in table and "up to 0.070" in table

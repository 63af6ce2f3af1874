"""Honest headlines: every selected task × trial counts, configurations never merge, bad input is reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.metrics import evaluate_rows, summarize
from qitos.benchmark.tau_bench.metrics import tau_metrics
from tests.platform.conftest import qit, rows, write_tasks


def row(task: str, trial: int, success: bool | None, reason: str = "final", **extra) -> dict:
    return {"task_id": task, "benchmark": "toy", "split": "test", "trial": trial, "success": success,
            "score": None if success is None else float(success), "stop_reason": reason, "run_spec_ref": "r1",
            "selected_tasks": 5, "trials_requested": 2, **extra}


def test_unscored_and_missing_trials_count_as_failures() -> None:
    # 5 tasks x 2 trials selected; 6 rows: 3 successes, 1 failure, 2 unscored; 4 trials never produced a row
    data = [row("a", 0, True), row("a", 1, True), row("b", 0, True), row("b", 1, False),
            row("c", 0, None, "requires_unavailable"), row("d", 0, None, "setup_failed")]
    m = summarize(data)
    assert (m["selected"], m["scored"], m["successes"]) == (10, 4, 3)
    assert m["success_rate"] == pytest.approx(3 / 10)
    assert m["coverage"] == pytest.approx(4 / 10)
    assert m["scored_success_rate"] == pytest.approx(3 / 4)
    assert m["unscored_by_reason"] == {"missing (no row)": 4, "requires_unavailable": 1, "setup_failed": 1}
    # pass^k over all 5 selected tasks with n = 2 requested trials: a 1, b 0 (C(1,2)=0), c d e 0
    assert m["pass_hat_k"]["1"] == pytest.approx((1 + 0.5) / 5)
    assert m["pass_hat_k"]["2"] == pytest.approx(1 / 5)


def test_tau_bench_pass_k_uses_the_trials_requested() -> None:
    data = [{**row("retail_0", t, True), "subset": "retail", "metadata": {"reward": 1.0}} for t in range(2)]
    data.append({**row("retail_1", 0, False, "error"), "subset": "retail", "metadata": {}})  # trial 1 never ran
    out = tau_metrics([{**r, "selected_tasks": 2} for r in data])
    assert out["average_reward"] == pytest.approx(2 / 4) and out["missing_trajectories"] == 1
    assert out["pass^1"] == pytest.approx((1 + 0) / 2) and out["pass^2"] == pytest.approx(1 / 2)


def test_rows_of_different_configurations_never_merge() -> None:
    a = [row(t, 0, True, run_spec_ref="conf-a", model="m") for t in "abc"]
    b = [row(t, 0, t == "a", run_spec_ref="conf-b", model="m") for t in "abc"]
    notes: list[str] = []
    groups = evaluate_rows(a + b + [a[0]], issues=notes)  # one exact duplicate within conf-a
    assert [g["group"]["run_spec_ref"] for g in groups] == ["conf-a", "conf-b"]
    assert [g["metrics"]["total"] for g in groups] == [3, 3]
    assert len(notes) == 1 and "duplicate row for task a" in notes[0]


def _run(tmp_path: Path, tasks: Path, out: str, *extra: str) -> None:
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
               "--output", out, *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_eval_of_two_configurations_shows_two_labelled_groups_and_loses_no_row(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    _run(tmp_path, tasks, "a.jsonl", "--max-steps", "3")
    _run(tmp_path, tasks, "b.jsonl", "--max-steps", "2")
    done = qit("bench", "eval", "-i", "a.jsonl", "-i", "b.jsonl", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rows"] == 6 and len(report["groups"]) == 2
    assert sum(g["metrics"]["total"] for g in report["groups"]) == 6
    labels = sorted(g["label"] for g in report["groups"])
    assert labels == ["max_steps=2", "max_steps=3"], labels
    by_recipe = json.loads(qit("bench", "eval", "-i", "a.jsonl", "--by", "recipe", "--json", cwd=tmp_path).stdout)
    assert by_recipe["groups"][0]["group"] == {"recipe": "runner:tests.support.runners:oracle"}
    unknown = qit("bench", "eval", "-i", "a.jsonl", "--by", "colour", cwd=tmp_path)
    assert unknown.returncode == 2 and "--by colour" in unknown.stderr and "no row has" in unknown.stderr


def test_bad_input_is_reported(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    limit = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
                "--limit", "-1", cwd=tmp_path)
    assert limit.returncode == 2 and "--limit -1" in limit.stderr and not (tmp_path / "results").exists()

    _run(tmp_path, tasks, "r.jsonl")
    refused = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
                  "--output", "r.jsonl", "--seed", "1", cwd=tmp_path)
    assert refused.returncode == 2 and "seed 0 -> 1" in refused.stderr, refused.stderr

    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"task_id": "x", "success": True}) + "\n" + (tmp_path / "r.jsonl").read_text())
    report = json.loads(qit("bench", "eval", "-i", broken, "--json", cwd=tmp_path).stdout)
    assert report["rows"] == 3 and any("line 1: task x: missing field(s) benchmark, stop_reason" in i
                                       for i in report["issues"])

    gaia = qit("bench", "export", "-i", "r.jsonl", "--format", "gaia-submission", cwd=tmp_path)
    assert gaia.returncode == 2 and "rows of jsonl" in gaia.stderr
    first = rows(tmp_path / "r.jsonl")[0]
    fake = tmp_path / "gaia.jsonl"
    fake.write_text("".join(json.dumps({**first, "benchmark": "gaia"}) + "\n" for _ in range(2)))
    dup = qit("bench", "export", "-i", fake, "--format", "gaia-submission", cwd=tmp_path)
    assert dup.returncode == 2 and "duplicate rows for" in dup.stderr

    page = tmp_path / "run.html"
    assert qit("bench", "export", "--run", first["trace_run_dir"], "--html", page, cwd=tmp_path).returncode == 0
    assert '<span class="badge ok">solved</span>' in page.read_text()  # from the manifest's evaluation, no row given


def test_bench_list_says_how_many_tasks_can_run_here(cybench_data: Path, tmp_path: Path) -> None:
    done = qit("bench", "list", "--json", "--data-dir", cybench_data.parent, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    info = {e["name"]: e for e in json.loads(done.stdout)}
    for split in ("unguided", "guided"):
        counts = info["cybench"]["runnable"][split]
        assert counts["tasks"] == 40 and counts["runnable"] + sum(counts["reasons"].values()) == 40, counts
    tau = info["tau-bench"]["runnable"]["test"]
    assert tau == {"tasks": 115, "runnable": 115, "reasons": {}}

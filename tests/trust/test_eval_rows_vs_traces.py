"""Rows against their traces (issue 22, item 3): a claimed success needs its trace. The manifest's evaluation
(written by the scoring side), task id and RunSpec fingerprint must agree with the row, or the row counts as
a failure and `qit bench eval` says which rows, where; rows that should have a trace and do not are reported
too. Relative trace_run_dirs are found as `qit bench run` wrote them, from any working directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.platform.conftest import qit, rows, write_tasks


def _write(path: Path, data: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


def _batch(tmp_path: Path, n: int = 4) -> list[dict]:
    tasks = write_tasks(tmp_path / "tasks.jsonl", n)
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle",
               "--validator", "--output", "results/r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return sorted(rows(tmp_path / "results" / "r.jsonl"), key=lambda r: r["task_id"])


def _eval(tmp_path: Path, path: Path, cwd: Path | None = None) -> dict:
    done = qit("bench", "eval", "-i", path, "--json", cwd=cwd or tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_rows_that_match_their_traces_pass_from_any_directory(tmp_path: Path) -> None:
    data = _batch(tmp_path)
    assert not Path(data[0]["trace_run_dir"]).is_absolute()  # as `qit bench run` writes it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd in (tmp_path, tmp_path / "results", elsewhere):
        report = _eval(tmp_path, tmp_path / "results" / "r.jsonl", cwd)
        assert report["trace_mismatches"] == 0, (cwd, report["issues"])
        assert report["groups"][0]["metrics"]["successes"] == 4


def test_a_success_its_trace_does_not_back_counts_as_a_failure(tmp_path: Path) -> None:
    t0, t1, t2, t3 = _batch(tmp_path)
    manifest = tmp_path / t0["trace_run_dir"] / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["evaluation"] = {"success": False, "score": 0.0}  # the scorer said no; the row says yes
    manifest.write_text(json.dumps(doc))
    moved = tmp_path / "runs" / "t2-copy"
    shutil.copytree(tmp_path / t2["trace_run_dir"], moved)
    forged = [t0,
              {**t1, "trace_run_dir": None},  # no trace at all
              {**t2, "trace_run_dir": t3["trace_run_dir"]},  # another task's trace
              {**t3, "run_spec_ref": "0123456789abcdef"},  # another configuration's row
              {**t1, "trial": 1, "trace_run_dir": "runs/gone"},  # a trace that is not there
              {**t2, "trial": 1, "success": False, "score": 0.0, "trace_run_dir": "runs/gone2"},  # failure, no trace
              {**t2, "trial": 2, "trace_run_dir": str(moved.resolve())},  # a copy of trial 0's trace, for trial 2
              {**t3, "trial": 1, "success": None, "score": None, "stop_reason": "setup_failed",
               "trace_run_dir": None},  # no trace due
              {**t1, "trace_run_dir": str((tmp_path / t1["trace_run_dir"]).resolve())}]  # absolute, and right
    path = _write(tmp_path / "results" / "forged.jsonl", forged)
    report = _eval(tmp_path, path)
    assert report["trace_mismatches"] == 7
    [note] = [i for i in report["issues"] if "do not match their trace" in i]
    assert note.startswith("7 row(s) do not match their trace: ") and note.count(str(path)) == 3
    assert f"{path}:1 t0 trace says success=false, row success=true" in note
    assert f"{path}:2 t1 claims success but has no trace_run_dir" in note
    assert f"{path}:3 t2 trace is of task t3" in note
    metrics = {tuple(g["group"].values()): g["metrics"] for g in report["groups"]}
    [m] = [m for key, m in metrics.items() if t0["run_spec_ref"] in key]
    assert m["successes"] == 1 and m["selected"] == 12  # only the absolute, matching row of t1 trial 0
    assert m["unscored_by_reason"]["does not match its trace"] == 4
    assert m["unscored_by_reason"]["setup_failed"] == 1
    [other] = [m for key, m in metrics.items() if "0123456789abcdef" in key]
    assert other["successes"] == 0 and other["unscored_by_reason"]["does not match its trace"] == 1

    table = qit("bench", "eval", "-i", path, cwd=tmp_path).stdout
    assert "7 row(s) do not match their trace:" in table.replace("\n", " ")

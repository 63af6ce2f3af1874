"""Bad input around results and runs (issue 26 items 6 and 9): one line naming the file and the fix, exit 2,
nothing written. The exports are real ones, written by `qit bench export` from a real Tau-Bench run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.platform.conftest import qit, rows, with_traces


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tau_data) -> Path:
    """A Tau-Bench oracle run (two tasks) and every export QitOS writes of it."""
    home = tmp_path_factory.mktemp("exports")
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    done = qit("bench", "run", "-b", "tau-bench", "--recipe", "oracle", "--limit", "2", "--output", "r.jsonl",
               cwd=home, env=env)
    assert done.returncode == 0, done.stderr
    run_dir = rows(home / "r.jsonl")[0]["trace_run_dir"]
    for fmt, name in (("tau-bench", "tau.json"), ("csv", "r.csv"), ("md", "r.md")):
        made = qit("bench", "export", "--input", "r.jsonl", "--format", fmt, "--output", name, cwd=home)
        assert made.returncode == 0, made.stderr
    made = qit("bench", "export", "--run", run_dir, "--html", "run.html", "--json", "run.json", cwd=home)
    assert made.returncode == 0, made.stderr
    gaia = with_traces([{"task_id": "g1", "benchmark": "gaia", "split": "validation", "trial": 0, "success": True,
                         "score": 1.0, "stop_reason": "final", "prediction": "42"}], home / "runs")
    (home / "gaia.jsonl").write_text(json.dumps(gaia[0]) + "\n")
    made = qit("bench", "export", "--input", "gaia.jsonl", "--format", "gaia-submission", "--output",
               "submission.jsonl", cwd=home)
    assert made.returncode == 0, made.stderr
    return home


def one_line_exit_2(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize(("name", "says"), [
    ("tau.json", ["a tau-bench results file", "`qit bench import --format tau-bench tau.json --subset retail`"]),
    ("r.csv", ["a CSV export (`qit bench export --format csv`)", "results JSONL it was made from"]),
    ("r.md", ["a Markdown table (`qit bench export --format md`)"]),
    ("run.json", ["a run exported as JSON", "`qit bench replay --run DIR`"]),
    ("run.html", ["an HTML page"]),
    ("submission.jsonl", ["a GAIA submission (`qit bench export --format gaia-submission`)"]),
])
def test_eval_and_export_name_an_export_given_as_results(exports, name, says):
    before = listing(exports)
    line = one_line_exit_2(qit("bench", "eval", "--input", "r.jsonl", name, cwd=exports))
    assert line.startswith(f"error: --input {name}: this is ") and "not a results JSONL" in line
    assert all(s in line for s in says), line
    again = one_line_exit_2(qit("bench", "export", "--input", name, "--format", "csv", "--output", "out.csv",
                                cwd=exports))
    assert again == line
    assert listing(exports) == before  # nothing written


def test_the_tau_bench_export_imports_as_eval_says(exports, tmp_path):
    """The command the error names works, and eval then reads the rows."""
    done = qit("bench", "import", "--format", "tau-bench", exports / "tau.json", "--subset", "retail", "--output",
               "imported.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = qit("bench", "eval", "--input", "imported.jsonl", "--json", cwd=tmp_path)
    assert report.returncode == 0 and json.loads(report.stdout)["rows"] == 2


def test_results_files_still_evaluate(exports):
    report = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=exports)
    assert report.returncode == 0 and json.loads(report.stdout)["rows"] == 2


def test_a_file_of_garbage_gives_twenty_notes_then_a_count(tmp_path):
    (tmp_path / "junk.jsonl").write_text("".join(f"line {i} [yellow]x[/]\n" for i in range(30)))
    done = qit("bench", "eval", "--input", "junk.jsonl", cwd=tmp_path)
    assert done.returncode == 0
    notes = [line for line in done.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 21 and notes[0].startswith("note: junk.jsonl line 1: not valid JSON")
    assert notes[-1] == "note: and 10 more (--json lists them all)"
    assert len(json.loads(qit("bench", "eval", "--input", "junk.jsonl", "--json", cwd=tmp_path).stdout)["issues"]) == 30


@pytest.mark.parametrize("outputs", [["--html", "x.html"], ["--json", "x.json"], ["--html", "x.html", "--json", "x.json"]])
def test_export_of_a_missing_run_is_one_line(tmp_path, outputs):
    line = one_line_exit_2(qit("bench", "export", "--run", "runs/nope", *outputs, cwd=tmp_path))
    assert line.startswith("error: --run runs/nope: no such run directory")
    assert listing(tmp_path) == set()


def test_export_and_replay_of_a_folder_that_is_no_run(tmp_path):
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    line = one_line_exit_2(qit("bench", "export", "--run", "runs/empty", "--html", "x.html", cwd=tmp_path))
    assert "--run runs/empty: not a QitOS run directory (it has no manifest.json)" in line
    assert one_line_exit_2(qit("bench", "replay", "--run", "runs/empty", cwd=tmp_path)) == line
    missing = one_line_exit_2(qit("bench", "replay", "--run", "runs/nope", cwd=tmp_path))
    assert missing.startswith("error: --run runs/nope: no such run directory")
    (tmp_path / "runs" / "empty" / "manifest.json").write_text("{not json")
    broken = one_line_exit_2(qit("bench", "export", "--run", "runs/empty", "--html", "x.html", cwd=tmp_path))
    assert "manifest is not valid" in broken
    assert listing(tmp_path) == {"runs", "runs/empty", "runs/empty/manifest.json"}

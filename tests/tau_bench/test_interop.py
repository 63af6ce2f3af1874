"""`qit bench export --format tau-bench` writes what upstream's run.py writes; import reads it back."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from qitos.cli.qit import app
from qitos.trace.reader import load_run

from .upstream_harness import upstream_modules


def test_export_is_upstreams_results_schema_and_imports_back(tau_data: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, [
        "bench", "run", "--benchmark", "tau-bench", "--subset", "airline", "--recipe", "oracle", "--trials", "2",
        "--option", "start_index=3", "--option", "end_index=6", "--output", str(tmp_path / "r.jsonl"),
        "--trace-logdir", str(tmp_path / "runs"), "--data-dir", str(tau_data.parent)])
    assert done.exit_code == 0, done.output
    exported = runner.invoke(app, ["bench", "export", "--input", str(tmp_path / "r.jsonl"), "--format", "tau-bench",
                                   "--output", str(tmp_path / "upstream.json")])
    assert exported.exit_code == 0, exported.output
    items = json.loads((tmp_path / "upstream.json").read_text())
    with upstream_modules(tau_data / "upstream", "http://127.0.0.1:9/v1"):
        from tau_bench.types import EnvRunResult

        results = [EnvRunResult.model_validate(item) for item in items]  # upstream's own schema accepts it
    assert sorted((r.task_id, r.trial) for r in results) == [(i, t) for i in range(3, 6) for t in range(2)]
    assert all(r.reward == 1.0 and r.traj and r.traj[0]["role"] == "system" for r in results)
    imported = runner.invoke(app, ["bench", "import", "--format", "tau-bench", str(tmp_path / "upstream.json"),
                                   "--subset", "airline", "--output", str(tmp_path / "back.jsonl"),
                                   "--trace-logdir", str(tmp_path / "imported")])
    assert imported.exit_code == 0, imported.output
    back = [json.loads(line) for line in (tmp_path / "back.jsonl").read_text().splitlines()]
    trace = load_run(Path(back[0]["trace_run_dir"]))  # a valid trace the board can show
    assert not trace.issues and trace.manifest.status == "completed"
    assert [e.payload["message"] for e in trace.events if e.kind == "imported_message"] == results[0].traj
    report = json.loads(runner.invoke(app, ["bench", "eval", "--input", str(tmp_path / "back.jsonl"), "--json"]).output)
    figures = report["groups"][0]["benchmark_metrics"]["tau-bench"]
    assert figures["average_reward"] == 1.0 and figures["pass^2"] == 1.0 and figures["tasks"] == 3


def test_import_refuses_a_file_that_is_not_upstream_results(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"task_id": 1}]))
    result = CliRunner().invoke(app, ["bench", "import", "--format", "tau-bench", str(bad), "--output",
                                      str(tmp_path / "x.jsonl"), "--trace-logdir", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "lacks reward, trial" in result.output


def test_import_then_export_gives_upstreams_file_back(tau_data: Path, tmp_path: Path) -> None:
    """An upstream results file (here: one QitOS exported, checked by upstream's schema above) survives
    import -> export unchanged: every `traj` kept, `info` not nested."""
    runner = CliRunner()
    done = runner.invoke(app, [
        "bench", "run", "--benchmark", "tau-bench", "--subset", "airline", "--recipe", "oracle",
        "--option", "start_index=3", "--option", "end_index=5", "--output", str(tmp_path / "r.jsonl"),
        "--trace-logdir", str(tmp_path / "runs"), "--data-dir", str(tau_data.parent)])
    assert done.exit_code == 0, done.output
    first = tmp_path / "upstream.json"
    assert runner.invoke(app, ["bench", "export", "--input", str(tmp_path / "r.jsonl"), "--format", "tau-bench",
                               "--output", str(first)]).exit_code == 0
    assert runner.invoke(app, ["bench", "import", "--format", "tau-bench", str(first), "--subset", "airline",
                               "--output", str(tmp_path / "back.jsonl"),
                               "--trace-logdir", str(tmp_path / "imported")]).exit_code == 0
    second = tmp_path / "again.json"
    assert runner.invoke(app, ["bench", "export", "--input", str(tmp_path / "back.jsonl"), "--format", "tau-bench",
                               "--output", str(second)]).exit_code == 0
    items, again = json.loads(first.read_text()), json.loads(second.read_text())
    assert all(item["traj"] for item in items) and again == items
    assert second.read_bytes() == first.read_bytes()

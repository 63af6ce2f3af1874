"""`qit bench eval` against rows moved between trials and tasks, rows sharing a trace, and edited results (issue 31,
item 6), on jsonl and GAIA: a row counts only if its trace is of the same task, trial and configuration, one trace
backs at most one row, and a claimed success is scored again from what its trace records. A run that ended `error`
is never official, and says so (`run_completed`).

The runs are real: the `qa` runner on the agent side against a loopback OpenAI-compatible server whose first answer
is right and every later one wrong, so one trial of the task succeeds and the other fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.platform.conftest import qit, rows
from tests.support.openai_server import OpenAIServer, Reply


def _answers(right: str):
    calls = []

    def reply(body) -> Reply:
        calls.append(1)
        return Reply(text=f"Final Answer: {right if len(calls) == 1 else 'surely not ' + right}")
    return reply


def _data(tmp_path: Path, benchmark: str) -> tuple[list[str], str, str]:
    """(flags selecting one task, its id, its right answer)."""
    if benchmark == "jsonl":
        tasks = tmp_path / "data" / "tasks.jsonl"
        tasks.parent.mkdir()
        tasks.write_text("".join(json.dumps({"id": f"t{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
                                 + "\n" for i in range(3)))
        return ["--root", str(tasks), "--task-ids", "t1"], "t1", "2"
    from tests.gaia.make_fixture import build_gaia_fixture

    root = build_gaia_fixture(tmp_path / "gaia")
    first = json.loads((root / "2023" / "validation" / "metadata.jsonl").read_text().splitlines()[0])
    return ["--root", str(root), "--task-ids", first["task_id"]], first["task_id"], first["Final answer"]


def _two_trials(tmp_path: Path, benchmark: str) -> tuple[Path, dict, dict]:
    flags, task_id, answer = _data(tmp_path, benchmark)
    with OpenAIServer(default=_answers(answer)) as server:
        done = qit("bench", "run", "-b", benchmark, *flags, "--runner", "tests.support.runners:qa", "--trials", "2",
                   "--concurrency", "1", "--model-name", "m", "--base-url", server.base_url,
                   "--output", "results/r.jsonl", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode == 0, done.stderr
    out = rows(tmp_path / "results" / "r.jsonl")
    [won] = [r for r in out if r["success"] is True]
    [lost] = [r for r in out if r["success"] is False]
    assert won["task_id"] == lost["task_id"] == task_id and {won["trial"], lost["trial"]} == {0, 1}
    return tmp_path / "results" / "r.jsonl", won, lost


def _eval(tmp_path: Path, path: Path) -> dict:
    done = qit("bench", "eval", "-i", path, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _write(path: Path, data: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


@pytest.mark.parametrize("benchmark", ["jsonl", "gaia"])
def test_a_row_copied_over_another_trial_does_not_count(benchmark: str, tmp_path: Path) -> None:
    results, won, lost = _two_trials(tmp_path, benchmark)
    honest = _eval(tmp_path, results)
    assert honest["trace_mismatches"] == 0 and honest["recomputed"] == 1, honest
    assert honest["groups"][0]["metrics"]["successes"] == 1

    copied = _write(tmp_path / "results" / "copied.jsonl", [won, {**won, "trial": lost["trial"]}])
    report = _eval(tmp_path, copied)
    assert report["trace_mismatches"] == 1, report["issues"]
    assert f"trace is of trial {won['trial']}, the row of trial {lost['trial']}" in report["issues"][0]
    metrics = report["groups"][0]["metrics"]
    assert metrics["successes"] == 1 and metrics["unscored_by_reason"]["does not match its trace"] == 1

    # one trace backs one row: the same row twice, and a row on a copy of the trace's folder
    twin = tmp_path / "runs" / "twin"
    shutil.copytree(tmp_path / won["trace_run_dir"], twin)
    for data in ([won, won], [won, {**won, "trace_run_dir": str(twin)}]):
        report = _eval(tmp_path, _write(tmp_path / "results" / "twice.jsonl", data))
        assert report["trace_mismatches"] == 1 and "trace already backs another row" in report["issues"][0], report


@pytest.mark.parametrize("benchmark", ["jsonl", "gaia"])
def test_a_row_pointing_at_another_tasks_trace_does_not_count(benchmark: str, tmp_path: Path) -> None:
    results, won, lost = _two_trials(tmp_path, benchmark)
    other = {**lost, "task_id": "someone-else", "success": True, "score": 1.0, "trace_run_dir": won["trace_run_dir"],
             "trial": won["trial"]}
    report = _eval(tmp_path, _write(tmp_path / "results" / "other.jsonl", [other]))
    assert report["trace_mismatches"] == 1 and f"trace is of task {won['task_id']}" in report["issues"][0], report
    assert report["groups"][0]["metrics"]["successes"] == 0


@pytest.mark.parametrize("benchmark", ["jsonl", "gaia"])
def test_an_edited_success_is_caught_by_scoring_its_trace_again(benchmark: str, tmp_path: Path) -> None:
    """The failed trial's row and its manifest both edited to success: only recomputing from the trace's answer
    against gold shows it."""
    results, won, lost = _two_trials(tmp_path, benchmark)
    manifest_path = tmp_path / lost["trace_run_dir"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["evaluation"]["final_answer"] and manifest["evaluation"]["success"] is False
    manifest["evaluation"].update(success=True, score=1.0)
    manifest_path.write_text(json.dumps(manifest))
    edited = _write(tmp_path / "results" / "edited.jsonl", [won, {**lost, "success": True, "score": 1.0}])
    report = _eval(tmp_path, edited)
    assert report["trace_mismatches"] == 1 and report["recomputed"] == 2, report
    assert "recomputed from its trace: success=false" in report["issues"][0], report["issues"]
    assert report["groups"][0]["metrics"]["successes"] == 1


def test_an_errored_run_is_never_official(tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    shutil.copy(Path(__file__).with_name("red_team_limits_agent.py"), folder / "red_team_limits_agent.py")
    (folder / "attack.txt").write_text("crash")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q0", "question": "What is 2 + 2?", "answer": "4"}) + "\n")
    with OpenAIServer(default=lambda body: Reply(text="Thought: hmm.")) as server:
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "red_team_limits_agent:build",
                   "--model-name", "m", "--base-url", server.base_url, "--output", tmp_path / "r.jsonl",
                   "--trace-logdir", tmp_path / "runs", cwd=folder, env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode in (0, 1), done.stderr
    (row,) = rows(tmp_path / "r.jsonl")
    assert row["stop_reason"] == "error", row
    manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
    checks = {c["check"]: c for c in manifest["official_checks"]}
    assert checks["run_completed"]["passed"] is False and "'error'" in checks["run_completed"]["detail"]
    assert checks["model_called"]["passed"] and checks["agent_isolated"]["passed"]  # only the ending fails it
    assert manifest["official_run"] is False


CYBENCH_TASK = "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic"


def test_cybench_answers_are_scored_again_from_the_trace(tmp_path: Path, cybench_data: Path) -> None:
    """The oracle's flag, recorded as the trace's answer, scores again to a success; the trace's answer edited to a
    wrong flag (the row and the evaluation still claiming success) does not."""
    from qitos.sandbox.bwrap import BwrapSandbox

    from tests.conftest import require_system

    require_system(BwrapSandbox.available()[0], "bubblewrap for CyBench's sandbox")
    done = qit("bench", "run", "-b", "cybench", "--recipe", "oracle", "--task-ids", CYBENCH_TASK, "--data-dir",
               cybench_data.parent, "--output", "results/r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (row,) = rows(tmp_path / "results" / "r.jsonl")
    assert row["success"] is True, row
    data_dir = ["--data-dir", str(cybench_data.parent)]
    report = json.loads(qit("bench", "eval", "-i", "results/r.jsonl", "--json", *data_dir, cwd=tmp_path).stdout)
    assert report["recomputed"] == 1 and report["trace_mismatches"] == 0, report
    manifest_path = tmp_path / row["trace_run_dir"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["evaluation"]["answers"] and manifest["evaluation"]["answers"][-1]
    manifest["evaluation"]["answers"] = ["HTB{not the flag}"]
    manifest_path.write_text(json.dumps(manifest))
    report = json.loads(qit("bench", "eval", "-i", "results/r.jsonl", "--json", *data_dir, cwd=tmp_path).stdout)
    assert report["trace_mismatches"] == 1 and "recomputed from its trace: success=false" in report["issues"][0], report
    assert report["groups"][0]["metrics"]["successes"] == 0

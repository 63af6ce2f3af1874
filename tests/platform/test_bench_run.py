"""`qit bench run` end to end: concurrency, trials, isolation, resume, Ctrl-C, RunSpec refusal."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.platform.conftest import REPO, qit, rows, write_tasks

RUNNER = "tests.support.runners:oracle"


def test_concurrent_trials_and_error_isolation(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 6, crash=(2,))
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", RUNNER, "--validator", "--trials", "3", "--concurrency", "4",
               "--output", "r.jsonl", "--model-name", "local", cwd=tmp_path, env={"QITOS_TEST_DELAY": "0.05"})
    assert done.returncode == 0, done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 18 and len({(r["task_id"], r["trial"]) for r in out}) == 18
    crashed = [r for r in out if r["task_id"] == "crash2"]
    assert len(crashed) == 3 and all(r["stop_reason"] == "error" for r in crashed)
    for r in crashed:
        assert "RuntimeError: runner crashed on crash2" in r["error"] and "Traceback" in r["error"], r["error"]
    ok = [r for r in out if r["task_id"] != "crash2"]
    assert all(r["success"] and r["stop_reason"] == "final" for r in ok)
    # every row points at a finished trace with the same RunSpec fingerprint
    refs = {r["run_spec_ref"] for r in out}
    assert len(refs) == 1
    for r in ok:
        manifest = json.loads((tmp_path / r["trace_run_dir"] / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["run_spec"]["fingerprint"] in refs
        assert manifest["benchmark_name"] == "jsonl" and manifest["experiment_spec"]["name"] == "jsonl:default"
        assert "answer" not in manifest["task"]["metadata"]
        # the outcome, and the answer it was scored on (what `qit bench eval` scores again)
        assert manifest["evaluation"] == {"success": True, "score": 1.0, "final_answer": r["prediction"]}


def test_rerun_resumes_and_retry_errors(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4, crash=(1,))
    args = ["bench", "run", "-b", "jsonl", "--root", tasks, "--runner", RUNNER, "--validator", "--output", "r.jsonl"]
    assert qit(*args, cwd=tmp_path).returncode == 0
    again = qit(*args, cwd=tmp_path)
    assert "0 to run, 4 already done" in again.stdout
    assert len(rows(tmp_path / "r.jsonl")) == 4
    retry = qit(*args, "--retry-errors", cwd=tmp_path)
    assert "1 to run, 3 already done" in retry.stdout
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 4 and sum(r["task_id"] == "crash1" for r in out) == 1


def test_results_of_another_runspec_are_refused(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    base = ["bench", "run", "-b", "jsonl", "--root", tasks, "--runner", RUNNER, "--validator", "--output", "r.jsonl"]
    assert qit(*base, cwd=tmp_path).returncode == 0
    refused = qit(*base, "--max-steps", "3", cwd=tmp_path)
    assert refused.returncode == 2 and "another configuration" in refused.stderr and "--force" in refused.stderr
    forced = qit(*base, "--max-steps", "3", "--force", cwd=tmp_path)
    assert forced.returncode == 0


def _start_batch(tmp_path, n=12, delay="0.4", agent_side=False):
    tasks = write_tasks(tmp_path / "tasks.jsonl", n)
    runner = ["tests.support.runners:slow_agent"] if agent_side else ["tests.support.runners:slow_oracle", "--validator"]
    args = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", str(tasks), "--runner",
            *runner, "--concurrency", "2", "--output", "r.jsonl"]
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO), "QITOS_TEST_DELAY": delay}
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if (tmp_path / "r.jsonl").exists() and len(rows(tmp_path / "r.jsonl")) >= 3:
            return proc, args, env
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("batch made no progress")


def test_sigkill_mid_batch_then_resume_loses_and_duplicates_nothing(tmp_path):
    proc, args, env = _start_batch(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    before = rows(tmp_path / "r.jsonl")
    assert 3 <= len(before) < 12
    for r in before:  # traces of finished tasks are intact: complete, or (killed between the row and its seal)
        manifest = json.loads((tmp_path / r["trace_run_dir"] / "manifest.json").read_text())  # final but unsealed
        sealed_later = manifest["status"] == "running" and manifest["summary"]["stop_reason"]
        assert manifest["status"] == "completed" or sealed_later, manifest
    env["QITOS_TEST_DELAY"] = "0"
    resumed = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    for r in before:  # the rerun seals what the kill left unsealed: every saved row's trace says it is complete
        assert json.loads((tmp_path / r["trace_run_dir"] / "manifest.json").read_text())["status"] == "completed"
    assert f"{12 - len(before)} to run, {len(before)} already done" in resumed.stdout
    after = rows(tmp_path / "r.jsonl")
    assert after[: len(before)] == before
    assert sorted(r["task_id"] for r in after) == sorted(f"t{i}" for i in range(12))


def _in_flight(runs: Path, fresh: float = 0.3) -> bool:
    """Is a task in flight and far from its end: a trace begun less than `fresh` seconds ago (of a task that takes
    a second) and not yet evaluated (a finished one stays `running` until its row is durable)?"""
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    for manifest in runs.glob("*/manifest.json"):
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        created = datetime.fromisoformat(data["created_at"].replace("Z", "+00:00"))
        if data["status"] == "running" and data.get("evaluation") is None and (now - created).total_seconds() < fresh:
            return True
    return False


@pytest.mark.parametrize("runner", ["validator", "agent side"])
def test_ctrl_c_cancels_in_flight_and_prints_summary(tmp_path, runner):
    proc, args, env = _start_batch(tmp_path, delay="1.0", agent_side=runner == "agent side")
    deadline = time.time() + 20  # a task is in flight when Ctrl-C comes
    while time.time() < deadline and not _in_flight(tmp_path / "runs"):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "cancelled" in out and "rerun the same command to resume" in out
    saved = rows(tmp_path / "r.jsonl")
    cancelled = [json.loads(m.read_text()) for m in (tmp_path / "runs").glob("*/manifest.json")]
    statuses = {m["status"] for m in cancelled}
    assert "cancelled" in statuses and "running" not in statuses
    assert all(r["stop_reason"] == "final" for r in saved), saved


def test_dry_run_executes_nothing(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", RUNNER, "--validator", "--dry-run", "--output", "r.jsonl",
               cwd=tmp_path)
    assert done.returncode == 0 and "dry run: nothing executed" in done.stdout
    assert not (tmp_path / "r.jsonl").exists()


def test_bad_flags_are_clear(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    cases = [
        (["-b", "nope"], "unknown benchmark 'nope'"),
        (["-b", "jsonl", "--root", "missing.jsonl"], "no such file"),
        (["-b", "jsonl", "--root", tasks, "--recipe", "zzz"], "has no recipe 'zzz'"),
        (["-b", "jsonl", "--root", tasks, "--runner", "nomodule"], "must look like"),
        (["-b", "jsonl", "--root", tasks, "--task-ids", "t0,bogus", "--runner", RUNNER, "--validator"], "unknown task id"),
    ]
    for args, message in cases:
        done = qit("bench", "run", *args, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q"}\n{oops\n')
    done = qit("bench", "run", "-b", "jsonl", "--root", bad, "--runner", RUNNER, "--validator", cwd=tmp_path)
    assert done.returncode == 2 and "bad.jsonl line 2" in done.stderr


def test_worker_processes_give_the_rows_threads_give(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 8, crash=(3,))
    base = ["bench", "run", "-b", "jsonl", "--root", tasks, "--runner", RUNNER, "--validator", "--trials", "2", "--concurrency", "4"]
    # each task takes a moment, so both workers are up before the first has taken every task
    slow = {"QITOS_TEST_DELAY": "0.1"}
    threads = qit(*base, "--output", "threads.jsonl", "--trace-logdir", "runs_threads", cwd=tmp_path, env=slow)
    workers = qit(*base, "--workers", "2", "--output", "workers.jsonl", "--trace-logdir", "runs_workers", cwd=tmp_path,
                  env=slow)
    assert threads.returncode == 0 and workers.returncode == 0, workers.stderr

    def comparable(name):
        return sorted((r["task_id"], r["trial"], r["success"], r["stop_reason"], r["prediction"], r["steps"],
                       r["run_spec_ref"]) for r in rows(tmp_path / name))

    assert comparable("threads.jsonl") == comparable("workers.jsonl") and len(comparable("workers.jsonl")) == 16
    pids = set()
    for r in rows(tmp_path / "workers.jsonl"):
        run_dir = tmp_path / r["trace_run_dir"]
        assert run_dir.parent.name == "runs_workers"
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == ("failed" if r["task_id"] == "crash3" else "completed")
        assert next(c for c in manifest["official_checks"] if c["check"] == "trace_complete")["passed"]
        assert not list(run_dir.glob(".manifest.json.*")), "the temporary manifest is removed at the end"
        pids.add(manifest["writer"]["pid"])
    assert len(pids) == 2, f"two worker processes wrote the traces, got writers {pids}"


@pytest.mark.parametrize("runner", ["validator", "agent side"])
def test_ctrl_c_with_worker_processes_cancels_and_resumes(tmp_path, runner):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 12)
    chosen = ["tests.support.runners:slow_agent"] if runner == "agent side" else ["tests.support.runners:slow_oracle",
                                                                                 "--validator"]
    args = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", str(tasks), "--runner",
            *chosen, "--concurrency", "4", "--workers", "2", "--output", "r.jsonl"]
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO), "QITOS_TEST_DELAY": "1.0"}
    # its own process group, like a terminal's foreground job: Ctrl-C reaches the parent and every worker
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + 60  # a row saved, and a task in flight (its trace begun, not yet evaluated)
    while time.time() < deadline and not ((tmp_path / "r.jsonl").exists() and rows(tmp_path / "r.jsonl")
                                          and _in_flight(tmp_path / "runs")):
        time.sleep(0.02)
    import os

    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "rerun the same command to resume" in out
    saved = rows(tmp_path / "r.jsonl")
    assert 1 <= len(saved) < 12 and all(r["stop_reason"] == "final" for r in saved)
    statuses = {json.loads(m.read_text())["status"] for m in (tmp_path / "runs").glob("*/manifest.json")}
    assert "cancelled" in statuses and "running" not in statuses
    env["QITOS_TEST_DELAY"] = "0"
    resumed = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{12 - len(saved)} to run, {len(saved)} already done" in resumed.stdout
    after = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in after) == sorted(f"t{i}" for i in range(12))


def test_bad_worker_flags_are_clear(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    base = ["bench", "run", "-b", "jsonl", "--root", tasks, "--runner", RUNNER, "--validator"]
    for args, message in [(["--workers", "0"], "--workers must be at least 1"),
                          (["--workers", "3", "--concurrency", "2"], "exceeds --concurrency 2"),
                          (["--workers", "2", "--concurrency", "2", "--executor", "ray"], "for the local executor")]:
        done = qit(*base, *args, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


def test_an_evaluator_crash_is_a_row_and_the_trace_is_still_final(tmp_path, monkeypatch):
    from qitos.benchmark.base import LoadOptions
    from qitos.run.config import RunConfig
    from qitos.run.runner import execute_batch, plan_batch

    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    plan = plan_batch(RunConfig(benchmark="jsonl", load=LoadOptions(root=tasks), runner=RUNNER, validator=True,
                                output=tmp_path / "r.jsonl", trace_logdir=tmp_path / "runs"))

    def explode(task, result, runtime):
        raise ValueError(f"scorer exploded on {task.id}")

    monkeypatch.setattr(plan.ctx.adapter, "evaluate", explode)
    outcome = execute_batch(plan)
    assert sorted(r.task_id for r in outcome.rows) == ["t0", "t1"]
    for row in outcome.rows:
        assert row.stop_reason == "error" and row.success is None
        assert f"evaluation failed: ValueError: scorer exploded on {row.task_id}" in row.error and "Traceback" in row.error
        manifest = json.loads((Path(row.trace_run_dir) / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["evaluation"] is None
    assert len(rows(tmp_path / "r.jsonl")) == 2

"""`--executor ray` on a local Ray instance gives the same rows and traces as the local executor."""

import json
import re

import pytest

from tests.platform.conftest import qit, rows, write_tasks

pytest.importorskip("ray", reason="install the `ray` extra: pip install 'qitos[ray]'")


def comparable(path):
    return sorted((r["task_id"], r["trial"], r["success"], r["stop_reason"], r["prediction"], r["steps"], r["run_spec_ref"])
                  for r in rows(path))


def test_ray_rows_match_local(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 5)
    base = ["bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator", "--trials", "2"]
    local = qit(*base, "--output", "local.jsonl", "--trace-logdir", "runs_local", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    ray_run = qit(*base, "--output", "ray.jsonl", "--trace-logdir", "runs_ray", "--executor", "ray", "--concurrency", "4",
                  cwd=tmp_path, env={"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}, timeout=600)
    assert ray_run.returncode == 0, ray_run.stderr[-3000:]
    local_rows, ray_rows = comparable(tmp_path / "local.jsonl"), comparable(tmp_path / "ray.jsonl")
    # fingerprints differ only by the executor recorded in the environment; everything else matches
    assert [r[:6] for r in local_rows] == [r[:6] for r in ray_rows]
    for r in rows(tmp_path / "ray.jsonl"):
        run_dir = tmp_path / r["trace_run_dir"]
        assert run_dir.parent.name == "runs_ray"
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["run_spec"]["environment"]["executor"] == "ray"
        assert (run_dir / "steps.jsonl").read_text().strip()


# a line of Ray's own Python loggers: "2026-12-06 08:45:07,384\tINFO worker.py:2038 -- Started a local Ray instance."
RAY_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\S+:\d+ -- ", re.M)


def test_ray_jobs_run_the_agent_side_confined(tmp_path):
    """On a Ray worker the job keeps its two sides: the agent in a confined agent host on that node, the trace and
    the row written by the job's scoring side. Ray's own output (here its start-up messages) goes to the run's Ray
    log, not the terminal."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(f"Final Answer: {2 * i}") + "\n" for i in range(1)))
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:qa",
               "--model-name", f"scripted:{script}", "--executor", "ray", "--concurrency", "3", "--output", "r.jsonl",
               cwd=tmp_path, env={"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not RAY_LINE.search(done.stderr), done.stderr[-3000:]
    ray_log = (tmp_path / "r.jsonl.ray.log").read_text()
    assert "Started a local Ray instance" in ray_log and RAY_LINE.search(ray_log), ray_log[-3000:]
    out = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in out) == ["t0", "t1", "t2"]
    assert [r["success"] for r in sorted(out, key=lambda r: r["task_id"])] == [True, False, False]
    for r in out:
        manifest = json.loads((tmp_path / r["trace_run_dir"] / "manifest.json").read_text())
        checks = {c["check"]: c for c in manifest["official_checks"]}
        assert checks["agent_isolated"]["passed"], checks["agent_isolated"]
        assert manifest["run_spec"]["environment"]["agent_side"] == "bwrap"

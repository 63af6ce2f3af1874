"""Each example in examples/ runs as its README says."""

import json
import os
import subprocess
import sys

from tests.platform.conftest import REPO, qit, rows


def test_custom_agent_runner_solves_with_its_tool(tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(json.dumps(x) for x in [
        '{"thought": "compute", "action": {"name": "calculate", "arguments": {"expression": "17 + 25"}}}',
        '{"thought": "done", "final_answer": "42"}',
    ]) + "\n")
    done = qit("bench", "run", "-b", "jsonl", "--root", REPO / "examples" / "arithmetic.jsonl", "--runner",
               "examples.custom_agent:build_agent", "--task-ids", "add-1", "--model-name", f"scripted:{script}",
               "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [row] = rows(tmp_path / "r.jsonl")
    assert row["success"] is True and row["steps"] == 2
    steps = [json.loads(line) for line in (tmp_path / row["trace_run_dir"] / "steps.jsonl").read_text().splitlines()]
    assert steps[0]["observation"] == ["42"]


def test_third_party_benchmark_through_entry_point(tmp_path):
    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                              "--target", str(target), str(REPO / "examples" / "third_party_benchmark")],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    env = {"PYTHONPATH": f"{target}{os.pathsep}{REPO}"}
    listed = qit("bench", "list", "--json", cwd=tmp_path, env=env)
    entry = next(e for e in json.loads(listed.stdout) if e["name"] == "countdown")
    assert entry["splits"] == {"test": 10} and entry["can_run"]
    done = qit("bench", "run", "-b", "countdown", "--runner", "tests.support.runners:oracle", "--validator", "--output", "r.jsonl",
               cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert sum(r["success"] for r in rows(tmp_path / "r.jsonl")) == 10


def test_compare_results_example(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "question": "q", "answer": "a"}) + "\n" for i in range(3)))
    assert qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
               "--output", "a.jsonl", cwd=tmp_path).returncode == 0
    b = [dict(r, success=(r["task_id"] != "t1")) for r in rows(tmp_path / "a.jsonl")]
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in b))
    done = subprocess.run([sys.executable, str(REPO / "examples" / "compare_results.py"), "a.jsonl", "b.jsonl"],
                          cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert "a.jsonl: 3/3 solved" in done.stdout and "only A: t1" in done.stdout

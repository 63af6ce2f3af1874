"""Offline end to end: the embedded local model as agent and as simulated user, 2 tasks x 2 trials (pass^2 needs two).

Slow on purpose (real llama.cpp inference over the full retail policy and tool list); budgets
are kept small. The model's answers are not judged, only that the run is complete and sound.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.tau_bench.upstream import load_upstream
from tests.platform.conftest import qit, rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def test_local_model_agent_and_user(tau_data: Path, tmp_path: Path) -> None:
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    protocol = load_upstream(tau_data)
    done = qit("bench", "run", "--benchmark", "tau-bench", "--subset", "retail", "--split", "test", "--limit", "2",
               "--trials", "2", "--max-steps", "2", "--max-tokens", "48", "--concurrency", "1",
               "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path, env=env, timeout=3500)
    assert done.returncode == 0, done.stdout + done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert sorted((r["task_id"], r["trial"]) for r in out) == [
        (f"tau_retail_test_{i:05d}", t) for i in range(2) for t in range(2)]
    for row in out:
        assert row["model"].startswith("local:") and ".gguf@sha256:" in row["model"] and row["error"] is None, row
        assert row["stop_reason"] in ("env_terminal", "budget_steps", "parse_error_limit"), row["stop_reason"]
        assert row["metadata"]["reward"] in (0.0, 1.0) and row["metadata"]["user_strategy"] == "llm"
        run_dir = tmp_path / row["trace_run_dir"]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["model_id"] == row["model"]  # rows and traces name the model the same way
        assert manifest["status"] == "completed" and manifest["replay_mode"] == "deterministic"
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        calls = [e["payload"] for e in events if e["kind"] == "user_model_call"]
        assert calls and all(c["usage"]["total_tokens"] > 0 and c["cost"] == 0.0 for c in calls)
        assert calls[0]["text"] == next(e["payload"]["observation"] for e in events if e["kind"] == "env_reset")
        prompt = next(e["payload"] for e in events if e["kind"] == "user_prompt")  # upstream's user prompt, traced
        instruction = json.loads((tau_data / "retail" / "tasks_test.json").read_text())[int(row["task_id"][-5:])]
        assert prompt["messages"][0]["content"] == protocol.user_system_prompt("llm", instruction["instruction"])

    report = qit("bench", "eval", "--input", "r.jsonl", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    for label in ("tau-bench: average_reward", "tau-bench: pass^1", "tau-bench: pass^2"):
        assert label in report.stdout

    longest = max(out, key=lambda r: r["steps"])  # re-execute the richest episode from its trace
    replay = qit("bench", "replay", "--run", longest["trace_run_dir"], "--reexecute", "--trace-logdir", "replays",
                 cwd=tmp_path, env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"identical: {longest['steps']} steps reproduced exactly" in replay.stdout

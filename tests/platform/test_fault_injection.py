"""Fault injection: `qit bench run` killed by SIGTERM, SIGHUP or SIGKILL at random points, then rerun.

What must hold after every kill (issue 26): no process of the run is left (the reaper finds them however they
detached), the rows on disk plus one rerun give exactly one row per task, and the model server saw each task at
most twice (the run cut short, then the rerun): no orphaned worker kept running tasks. Kills are aimed at three
phases: anywhere from the command's start (planning included), soon after the run has planned, and just after
the first row landed. Three lanes run side by side (each its own files and model server) to keep this short.
With `--executor ray` (a local Ray started by qit) one lane takes the kills, one Ray instance at a time.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer, Reply

from .conftest import REPO, rows, write_tasks

TASKS = 12
LATENCY = 0.5
SEED = 20261202
SIGNALS = ("TERM", "HUP", "KILL")


def _answer(body: dict) -> Reply:
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return Reply(text=f"Final Answer: {question.split()[2]}")


def _first_requests(server: OpenAIServer) -> Counter:
    """Runs the server saw per task: requests opening an episode (no assistant turn yet)."""
    seen: Counter = Counter()
    for request in server.requests:
        messages = request["body"]["messages"]
        if not any(m["role"] == "assistant" for m in messages):
            seen[next(m["content"] for m in messages if m["role"] == "user")] += 1
    return seen


def _command(lane: Path, server: OpenAIServer, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", str(lane / "tasks.jsonl"),
            "--model-name", "m", "--base-url", server.base_url, "--api-key-env", "FAULT_TEST_KEY",
            "--concurrency", "3", "--output", str(lane / "r.jsonl"), "--trace-logdir", str(lane / "runs"), *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "FAULT_TEST_KEY": "k", "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}


def _start_mark(lane: Path, phase: str) -> list[str]:
    return {"start": [], "planned": ["--start-when", str(lane / "runs")],
            "first row": ["--start-when", f"{lane / 'r.jsonl'}:1"]}[phase]


def completed_traces_have_rows(lane: Path, found: list[dict], where: str) -> None:
    """A trace whose manifest says the run is over (`completed`, `failed`) has its row on disk: rows are durable
    before traces say they are done."""
    named = {Path(r["trace_run_dir"]).name for r in found if r.get("trace_run_dir")}
    for manifest in (lane / "runs").glob("*/manifest.json"):
        status = json.loads(manifest.read_text()).get("status")
        assert status not in ("completed", "failed") or manifest.parent.name in named, (
            f"{where}: trace {manifest.parent.name} says {status} and has no row")


def kill_then_resume(lane: Path, extra: list[str], signal_name: str, phase: str, after: float,
                     linger: float = 2.0) -> dict:
    """One kill `after` seconds into `phase`, the checks, then a rerun to completion, checked."""
    for old in (lane / "r.jsonl", lane / "runs"):
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    with OpenAIServer(default=_answer, latency_seconds=LATENCY) as server:
        command = _command(lane, server, extra)
        killed = subprocess.run([sys.executable, "-m", "tests.support.reaper", "--after", f"{after:.2f}",
                                 "--signal", signal_name, "--linger", str(linger), *_start_mark(lane, phase), "--", *command],
                                cwd=REPO, env=_env(), capture_output=True, text=True, timeout=180)
        report = json.loads(killed.stdout.strip().splitlines()[-1])
        where = f"{signal_name} {after:.2f}s after {phase} ({' '.join(extra)})"
        assert not report["survivors"], f"{where}: processes outlived the run: {report['survivors']}"
        before = rows(lane / "r.jsonl") if (lane / "r.jsonl").exists() else []
        if report["signalled"] and signal_name != "KILL":
            # Ctrl-C's path: exit 128 + the signal; the signal's default (death) only while Python starts up
            number = 15 if signal_name == "TERM" else 1
            assert report["code"] == 128 + number or (report["code"] == -number and not before), (
                where, report, killed.stderr[-2000:])
        assert len({r["task_id"] for r in before}) == len(before), f"{where}: a duplicated row"
        completed_traces_have_rows(lane, before, where)
        resumed = subprocess.run(command, cwd=lane, env=_env(), capture_output=True, text=True, timeout=180)
        assert resumed.returncode == 0, (where, resumed.stderr[-3000:])
        after_rows = rows(lane / "r.jsonl")
        assert after_rows[: len(before)] == before, f"{where}: finished rows changed"
        assert sorted(r["task_id"] for r in after_rows) == sorted(f"t{i}" for i in range(TASKS)), where
        seen = _first_requests(server)
        assert len(seen) == TASKS and max(seen.values()) <= 2, f"{where}: runs per task {dict(seen)}"
        return {"where": where, "signalled": report["signalled"], "rows_before": len(before)}


def kill_plan(name: str) -> list[tuple[str, str, float]]:
    """Each signal once per phase, at seeded random times: 9 kills."""
    rng = random.Random(f"{SEED}-{name}")
    spans = {"start": (0.3, 4.0), "planned": (0.2, 1.5), "first row": (0.0, 0.8)}
    return [(sig, phase, rng.uniform(*spans[phase])) for sig in SIGNALS for phase in spans]


def run_lanes(tmp_path: Path, extra: list[str], plan: list[tuple[str, str, float]], lanes: int = 3,
              linger: float = 2.0) -> list[dict]:
    def lane_work(number: int) -> list[dict]:
        lane = tmp_path / f"lane{number}"
        lane.mkdir()
        write_tasks(lane / "tasks.jsonl", TASKS)
        return [kill_then_resume(lane, extra, *kill, linger=linger) for kill in plan[number::lanes]]

    with cf.ThreadPoolExecutor(lanes) as pool:
        return [outcome for results in pool.map(lane_work, range(lanes)) for outcome in results]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_killed_runs_leave_nothing_behind_and_resume_exactly(tmp_path, workers):
    outcomes = run_lanes(tmp_path, ["--workers", workers], kill_plan(f"workers-{workers}"))
    mid_run = [o for o in outcomes if o["signalled"] and 0 < o["rows_before"] < TASKS]
    assert len(mid_run) >= 3, outcomes  # the kills aimed after the first row landed while tasks were running


def test_killed_ray_runs_leave_nothing_behind_and_resume_exactly(tmp_path):
    """`--executor ray` with the local Ray that qit starts: SIGTERM and SIGKILL while tasks run. No process
    of the run is left (Ray's own included: its workers, raylet, GCS and agents), and rows + rerun are exact."""
    pytest.importorskip("ray", reason="install the `ray` extra: pip install 'qitos[ray]'")
    rng = random.Random(f"{SEED}-ray")
    # SIGHUP takes SIGTERM's path (lifetime.py); each Ray kill costs two local Ray starts, so two kills
    plan = [("TERM", "first row", rng.uniform(0.0, 0.8)), ("KILL", "first row", rng.uniform(0.0, 0.8))]
    outcomes = run_lanes(tmp_path, ["--executor", "ray"], plan, lanes=1, linger=5.0)  # one Ray at a time
    assert all(o["signalled"] for o in outcomes), outcomes
    assert any(0 < o["rows_before"] < TASKS for o in outcomes), outcomes

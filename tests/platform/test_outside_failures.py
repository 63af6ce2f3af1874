"""Failures outside the agent (issue 32): a faulty endpoint, a killed worker or agent process, a second run on the
same results file. After each: no process left, no finished row lost, no outside failure scored as the agent's
(`success` null, an outside stop reason), the run says what happened and exits 3, and an identical rerun
completes every task exactly once (saying it runs the outside failures again).

Lanes run side by side (each its own files and loopback model server) to keep this short.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from qitos.core.stop import OUTSIDE_AGENT
from tests.support.openai_server import FAULTS, OpenAIServer, Reply, fault

from .conftest import REPO, rows, write_tasks
from .test_fault_injection import SEED, _env, _first_requests, completed_traces_have_rows

TASKS = 8
KILLS: Counter = Counter()  # the kill table: (mode, victim) -> kills, printed at the end of the session


def _command(lane: Path, server: OpenAIServer, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", str(lane / "tasks.jsonl"),
            "--model-name", "m", "--base-url", server.base_url, "--api-key-env", "FAULT_TEST_KEY", "--max-retries", "1",
            "--request-timeout", "2", "--output", str(lane / "r.jsonl"), "--trace-logdir", str(lane / "runs"), *extra]


def _check_rows(found: list[dict], where: str) -> None:
    """No outside failure scored; no task × trial twice."""
    keys = [(r["task_id"], r.get("trial", 0)) for r in found]
    assert len(keys) == len(set(keys)), f"{where}: a duplicated row"
    for r in found:
        if r["stop_reason"] in OUTSIDE_AGENT:
            assert r["success"] is None and r["score"] is None, f"{where}: an outside failure scored: {r}"


def _rerun_completes(lane: Path, server: OpenAIServer, extra: list[str], before: list[dict], where: str) -> None:
    """The identical command again: every task once, the finished rows kept as they were."""
    resumed = subprocess.run(_command(lane, server, extra), cwd=lane, env=_env(), capture_output=True, text=True,
                             timeout=180)
    assert resumed.returncode == 0, (where, resumed.stdout[-2000:], resumed.stderr[-3000:])
    outside = [r for r in before if r["stop_reason"] in OUTSIDE_AGENT]
    if outside:
        assert f"{len(outside)} row(s) failed outside the agent" in resumed.stderr, (where, resumed.stderr[-2000:])
        assert "running them again" in resumed.stderr
    after = rows(lane / "r.jsonl")
    _check_rows(after, where)
    kept = [r for r in before if r["stop_reason"] not in OUTSIDE_AGENT]
    assert [r for r in after if r in kept] == kept, f"{where}: finished rows changed"
    assert sorted(r["task_id"] for r in after) == sorted(f"t{i}" for i in range(TASKS)), where
    assert all(r["success"] is True for r in after), (where, [r for r in after if not r["success"]])


def _number(body: dict) -> int:
    """N of the task's question, "What is N + N?"."""
    return int(re.search(r"What is (\d+) \+", json.dumps(body["messages"])).group(1))


def _answer(body: dict) -> Reply:
    """The right answer (the jsonl tasks' answer is 2N)."""
    return Reply(text=f"Final Answer: {2 * _number(body)}")


def _faulty(kind: str):
    """Answers tasks with an even number, fails the odd ones with `kind`."""
    return lambda body: fault(kind) if _number(body) % 2 else _answer(body)


def _endpoint_lane(tmp_path: Path, kind: str) -> float:
    lane = tmp_path / kind
    lane.mkdir()
    write_tasks(lane / "tasks.jsonl", TASKS)
    started = time.monotonic()
    with OpenAIServer(default=_faulty(kind)) as server:
        extra = ["--concurrency", "4", *(["--task-timeout", "4", "--request-timeout", "120"] if kind == "hang" else [])]
        run = subprocess.run(_command(lane, server, extra), cwd=lane, env=_env(), capture_output=True, text=True,
                             timeout=180)
        where = f"endpoint {kind}"
        assert run.returncode == 3, (where, run.returncode, run.stdout[-2000:], run.stderr[-2000:])
        assert "failed outside the agent (unscored): 4 row(s): 4 model_error" in run.stdout, (where, run.stdout)
        assert "rerun the same command" in run.stdout
        before = rows(lane / "r.jsonl")
        _check_rows(before, where)
        failed = sorted(r["task_id"] for r in before if r["stop_reason"] == "model_error")
        assert failed == [f"t{i}" for i in range(1, TASKS, 2)], (where, before)
        if kind == "hang":  # --task-timeout bounds the wait (the request timeout alone would wait 120 s x 2 tries)
            latency = [r["latency_seconds"] for r in before if r["stop_reason"] == "model_error"]
            assert max(latency) < 4 + 2, (where, latency)
            assert all("--task-timeout" in r["error"] for r in before if r["stop_reason"] == "model_error")
        server.default = _answer  # the endpoint is back
        _rerun_completes(lane, server, extra, before, where)
    return time.monotonic() - started


def test_faulty_endpoints_are_outside_failures_and_rerun(tmp_path):
    with cf.ThreadPoolExecutor(len(FAULTS)) as pool:
        took = dict(zip(FAULTS, pool.map(lambda kind: _endpoint_lane(tmp_path, kind), FAULTS)))
    print(f"endpoint faults: {', '.join(f'{k} {v:.1f}s' for k, v in took.items())}")


def test_task_timeout_bounds_a_hanging_request(tmp_path):
    """One task against an endpoint that never answers: --task-timeout 3 ends it in about 3 s (not the request
    timeout's 120 s), unscored: the endpoint never answered."""
    write_tasks(tmp_path / "tasks.jsonl", 1)
    with OpenAIServer(default=lambda body: fault("hang")) as server:
        command = _command(tmp_path, server, ["--task-timeout", "3"])
        command[command.index("--request-timeout") + 1] = "120"
        started = time.monotonic()
        run = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
    (row,) = rows(tmp_path / "r.jsonl")
    assert row["stop_reason"] == "model_error" and row["success"] is None, row
    # the budget runs from when the scoring side sent the job; the agent's own clock (the row's latency) starts a
    # moment later
    assert 2.9 <= row["latency_seconds"] < 5, row["latency_seconds"]
    assert run.returncode == 1 and took < 40, (took, run.stderr[-2000:])  # 1: every row failed to run
    assert "failed outside the agent (unscored): 1 row(s): 1 model_error" in run.stdout, run.stdout


# -- kills of a worker or an agent process ------------------------------------------------------------------------

MODES = {  # execution mode -> flags
    "threads": ["--workers", "1", "--agent-processes", "task"],
    "workers": ["--workers", "2", "--agent-processes", "task"],
    "batch": ["--workers", "1", "--agent-processes", "batch"],
    "workers-batch": ["--workers", "2", "--agent-processes", "batch"],
}
VICTIMS = {"threads": ("agent", "agent-host", "qit"), "workers": ("worker", "agent"), "batch": ("agent", "qit"),
           "workers-batch": ("worker", "agent", "qit")}


def kill_plan() -> list[tuple[str, str, float]]:
    """Each mode × victim once, at a seeded random moment after the first row landed (test_fault_injection
    kills qit and its group in the other modes)."""
    rng = random.Random(f"{SEED}-outside")
    return [(mode, victim, rng.uniform(0.0, 1.5)) for mode, victims in VICTIMS.items() for victim in victims]


def _kill_lane(lane: Path, plan: list[tuple[str, str, float]]) -> list[dict]:
    out = []
    for number, (mode, victim, after) in enumerate(plan):
        for old in (lane / "r.jsonl", lane / "runs"):
            subprocess.run(["rm", "-rf", str(old)], check=True)
        extra = ["--concurrency", "2", *MODES[mode]]
        where = f"SIGKILL {victim} {after:.2f}s after the first row ({mode})"
        with OpenAIServer(default=_answer, latency_seconds=0.8) as server:
            command = _command(lane, server, extra)
            killed = subprocess.run([sys.executable, "-m", "tests.support.reaper", "--after", f"{after:.2f}",
                                     "--signal", "KILL", "--victim", victim, "--seed", f"{SEED}-{number}",
                                     "--start-when", f"{lane / 'r.jsonl'}:1", "--", *command],
                                    cwd=REPO, env=_env(), capture_output=True, text=True, timeout=240)
            report = json.loads(killed.stdout.strip().splitlines()[-1])
            assert not report["survivors"], f"{where}: processes outlived the run: {report['survivors']}"
            before = rows(lane / "r.jsonl") if (lane / "r.jsonl").exists() else []
            _check_rows(before, where)
            completed_traces_have_rows(lane, before, where)
            outside = [r for r in before if r["stop_reason"] in OUTSIDE_AGENT]
            complete = len(before) == TASKS and not outside
            expected = -9 if victim == "qit" and report["signalled"] else (0 if complete else 3)
            assert report["code"] == expected, (where, report, killed.stderr[-3000:])
            odd = [(r["task_id"], r["stop_reason"], r.get("error")) for r in before
                   if r["stop_reason"] not in ("final", "agent_process_died", "worker_died")]
            assert not odd, (where, odd)
            if victim == "worker" and report["signalled"] and not complete:
                assert any(r["stop_reason"] == "worker_died" for r in before) or len(before) < TASKS, before
            _rerun_completes(lane, server, extra, before, where)
            seen = _first_requests(server)
            assert len(seen) == TASKS and max(seen.values()) <= 2, f"{where}: runs per task {dict(seen)}"
        KILLS[(mode, victim)] += 1
        out.append({"where": where, "signalled": report["signalled"], "outside": len(outside),  # "qit": none
                    "rows_before": len(before)})
    return out


def test_killed_workers_and_agent_processes_are_outside_failures(tmp_path):
    plan, lanes = kill_plan(), 3
    random.Random(SEED).shuffle(plan)
    started = time.monotonic()

    def lane_work(number: int) -> list[dict]:
        lane = tmp_path / f"lane{number}"
        lane.mkdir()
        write_tasks(lane / "tasks.jsonl", TASKS)
        return _kill_lane(lane, plan[number::lanes])

    with cf.ThreadPoolExecutor(lanes) as pool:
        outcomes = [o for found in pool.map(lane_work, range(lanes)) for o in found]
    hit = [o for o in outcomes if o["signalled"] and (o["outside"] or "qit" in o["where"])]
    print(f"kill table: {sum(KILLS.values())} kills, {len(hit)} with tasks in flight unscored and run again, "
          f"{time.monotonic() - started:.0f}s: " + ", ".join(f"{m}/{v} {n}" for (m, v), n in sorted(KILLS.items())))
    assert all(o["signalled"] for o in outcomes), [o["where"] for o in outcomes if not o["signalled"]]
    assert len(hit) >= len(plan) // 2, outcomes  # most kills caught tasks in flight


def test_a_second_run_on_the_same_results_file_is_refused(tmp_path):
    write_tasks(tmp_path / "tasks.jsonl", 6)
    with OpenAIServer(default=_answer, latency_seconds=2.0) as server:  # the first run takes 12 s or more
        command = _command(tmp_path, server, ["--concurrency", "1"])
        command[command.index("--request-timeout") + 1] = "30"  # the 2 s replies must not time out under load
        first = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        deadline = time.monotonic() + 60
        while not (tmp_path / "runs").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)
        out, err = first.communicate(timeout=120)
    assert second.returncode == 2, (second.stdout[-2000:], second.stderr)
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"(pid {first.pid})" in lines[0] and "another run" in lines[0], second.stderr
    assert first.returncode == 0, err[-2000:]
    found = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in found) == [f"t{i}" for i in range(6)]


def test_a_full_disk_is_an_outside_failure_and_rerun(tmp_path):
    """Traces on a tiny tmpfs (64 KiB, in a mount namespace of bwrap's) fill it: the tasks whose traces could not be
    written end `disk_full`, unscored; the same command with room runs them again."""
    import shutil

    if not shutil.which("bwrap") or subprocess.run(["bwrap", "--dev-bind", "/", "/", "true"]).returncode:
        pytest.skip("needs bubblewrap (a mount namespace for the tiny tmpfs)")
    write_tasks(tmp_path / "tasks.jsonl", TASKS)
    (tmp_path / "runs").mkdir()
    with OpenAIServer(default=_answer) as server:
        command = _command(tmp_path, server, ["--concurrency", "2"])
        full = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--size", str(64 * 1024), "--tmpfs",
                               str(tmp_path / "runs"), "--", *command], cwd=tmp_path, env=_env(),
                              capture_output=True, text=True, timeout=180)
        before = rows(tmp_path / "r.jsonl")
        _check_rows(before, "full disk")
        filled = [r for r in before if r["stop_reason"] == "disk_full"]
        assert filled and full.returncode in (1, 3), (full.returncode, full.stdout[-2000:], full.stderr[-2000:])
        assert all("No space left on device" in r["error"] for r in filled), filled[0]["error"]
        assert "Traceback" not in full.stderr, full.stderr[-2000:]
        _rerun_completes(tmp_path, server, ["--concurrency", "2"], before, "full disk")


def test_an_agent_host_killed_while_planning_is_one_line(tmp_path):
    """The agent host is killed as soon as it appears (while the run describes the agent): one line, exit 1, no
    traceback, no row, no process left."""
    write_tasks(tmp_path / "tasks.jsonl", 2)
    with OpenAIServer(default=_answer) as server:
        killed = subprocess.run([sys.executable, "-m", "tests.support.reaper", "--after", "0", "--signal", "KILL",
                                 "--victim", "agent-host", "--", *_command(tmp_path, server, [])],
                                cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    report = json.loads(killed.stdout.strip().splitlines()[-1])
    assert report["signalled"] and not report["survivors"], report
    lines = [line for line in killed.stderr.splitlines() if line.strip()]
    assert report["code"] == 1 and len(lines) == 1, (report, killed.stderr[-2000:])
    assert lines[0].startswith("error: the agent process failed before the run started"), lines
    assert not (tmp_path / "r.jsonl").exists() or not rows(tmp_path / "r.jsonl")


@pytest.fixture(scope="module", autouse=True)
def _kill_table():
    yield
    if KILLS:
        sys.stderr.write(f"\nkill table: {dict(KILLS)}\n")

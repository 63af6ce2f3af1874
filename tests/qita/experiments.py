"""Real Tau-Bench traces for the board's experiment views, made with `qit bench run`.

Three configurations of retail/test: the oracle over 3 tasks (a validator), and a scripted agent
with a scripted LLM user on task 1, twice (so a configuration has 2 trials and pass^k has a
curve). The scripts are the ones tests/tau_bench/test_replay.py uses, so the run really solves
its task through the simulated user.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.tau_bench.test_replay import AGENT_SCRIPT, USER_SCRIPT

from .corpus import qit


@dataclass
class TauRuns:
    root: Path
    logdir: Path
    results: list[Path]
    conversation_run: str  # a run whose user is a (scripted) LLM user
    oracle_runs: dict[str, str]  # task id -> the oracle's run of it


def _jsonl(path: Path, items: list) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def build_tau_runs(root: Path, tau_data: Path) -> TauRuns:
    env_root = root
    common = ["-b", "tau-bench", "--subset", "retail", "--split", "test", "--data-dir", tau_data.parent]
    done = qit("bench", "run", *common, "--limit", "3", "--recipe", "oracle", cwd=env_root)
    assert done.returncode == 0, done.stdout + done.stderr
    agent, user = _jsonl(root / "agent.jsonl", AGENT_SCRIPT), _jsonl(root / "user.jsonl", USER_SCRIPT)
    done = qit("bench", "run", *common, "--task-ids", "tau_retail_test_00001", "--trials", "2",
               "--model-name", f"scripted:{agent}", "--user-model", f"scripted:{user}",
               "--output", "results/scripted.jsonl", cwd=env_root)
    assert done.returncode == 0, done.stdout + done.stderr
    logdir = root / "runs"
    results = sorted((root / "results").glob("*.jsonl"))
    rows = {p.name: [json.loads(line) for line in p.read_text().splitlines()] for p in results}
    oracle = next(v for k, v in rows.items() if "oracle" in k)
    return TauRuns(root, logdir, results, Path(rows["scripted.jsonl"][0]["trace_run_dir"]).name,
                   {r["task_id"]: Path(r["trace_run_dir"]).name for r in oracle})

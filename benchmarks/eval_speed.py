"""`qit bench eval` on 100,000 rows (target: under 2 s), timed as a user runs it (CLI subprocess).

Also prints `python -c pass` and `qit --help` in the same run, so start-up cost is visible.
Run: .venv/bin/python benchmarks/eval_speed.py [--rows 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_rows(path: Path, n: int) -> None:
    rng = random.Random(0)
    reasons = ["final", "final", "final", "budget_steps", "error", "env_terminal"]
    with open(path, "w") as fh:
        for i in range(n):
            ok = rng.random() < 0.4
            fh.write(json.dumps({
                "task_id": f"task-{i % 5000}", "benchmark": rng.choice(["tau-bench", "gaia", "jsonl"]), "split": "test",
                "subset": None, "trial": i // 5000, "model": rng.choice(["gpt-4o-mini", "local"]), "prediction": "x" * 20,
                "success": ok, "score": 1.0 if ok else 0.0, "stop_reason": rng.choice(reasons), "steps": rng.randint(1, 30),
                "latency_seconds": rng.random() * 20, "token_usage": {"prompt_tokens": 900, "completion_tokens": 100,
                                                                      "total_tokens": 1000, "cached_tokens": 0},
                "cost": 0.001, "trace_run_dir": f"runs/r{i}", "run_spec_ref": "abcdef0123456789", "error": None,
                "metadata": {"reward": 1.0 if ok else 0.0},
            }) + "\n")


def wall(cmd: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1000:])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.jsonl"
        make_rows(path, args.rows)
        base = wall([sys.executable, "-c", "pass"])
        help_ = wall([sys.executable, "-m", "qitos.cli.qit", "--help"])
        table = wall([sys.executable, "-m", "qitos.cli.qit", "bench", "eval", "--input", str(path)])
        as_json = wall([sys.executable, "-m", "qitos.cli.qit", "bench", "eval", "--input", str(path), "--json"])
    print(f"rows: {args.rows} ({path.name}, {args.rows / 1000:.0f}k)")
    print(f"python -c pass        : {base:.3f} s")
    print(f"qit --help            : {help_:.3f} s")
    print(f"qit bench eval (table): {table:.3f} s  (target < 2 s)")
    print(f"qit bench eval --json : {as_json:.3f} s")


if __name__ == "__main__":
    main()

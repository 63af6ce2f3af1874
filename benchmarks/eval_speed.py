"""`qit bench eval` on 100,000 rows (target: under 2 s), timed as a user runs it (CLI subprocess).

Eval checks each claimed success against its trace's manifest, so the rows point at real trace
directories (`runs/r<i>/manifest.json`, about 4 KB each, relative paths as `qit bench run` writes
them, beside the results file); `--traces without` times the same rows with no trace directory on
disk (every success then fails the check, and no manifest is read). Also prints `python -c pass`
and `qit --help` in the same run, so start-up cost is visible.
Run: .venv/bin/python benchmarks/eval_speed.py [--rows 100000] [--traces with|without|both]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN_SPEC_REF = "abcdef0123456789"


def manifest(run_id: str, task_id: str, ok: bool, reason: str) -> dict:
    """A manifest shaped and sized like a real one (RunSpec, tools, summary, checks)."""
    tools = [{"name": f"tool_{k}", "description": "d" * 120, "read_only": k % 2 == 0,
              "input_schema": {"type": "object", "properties": {"path": {"type": "string", "description": "p" * 60}},
                               "required": ["path"]}} for k in range(4)]
    spec = {"model_name": "gpt-4o-mini", "model_family": "openai_compat", "model_provider": "openai_compat",
            "base_url_host": "api.openai.com", "generation": {"temperature": 0.0}, "prompt_protocol": "react_text_v1",
            "parser_name": "react_text_v1", "toolset_name": "gaia", "tool_manifest": tools,
            "environment": {"python": "3.11.7", "platform": "linux-x86_64", "qitos": "0.1.0", "executor": "local"},
            "seed": 0, "budget": {"max_steps": 30}, "git_sha": "a" * 40, "package_version": "0.1.0",
            "benchmark_name": "gaia", "benchmark_split": "test", "dataset_digest": "9ede0a53ce019748",
            "metadata": {"recipe": "react"}, "fingerprint": RUN_SPEC_REF}
    return {"run_id": run_id, "schema_version": "qitos.trace.v1", "status": "completed",
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:09.000Z", "step_count": 7,
            "event_count": 30, "summary": {"stop_reason": reason, "final_result": "x" * 20, "steps": 7},
            "model_id": "gpt-4o-mini", "tool_manifest": tools, "run_spec": spec,
            "official_checks": [{"check": f"check_{k}", "passed": True, "detail": "ok"} for k in range(9)],
            "task": {"id": task_id, "objective": "q" * 200, "metadata": {"benchmark": "gaia"}},
            "evaluation": {"success": ok, "score": 1.0 if ok else 0.0}}


def make_rows(path: Path, n: int, traces: bool) -> None:
    rng = random.Random(0)
    reasons = ["final", "final", "final", "budget_steps", "error", "env_terminal"]
    with open(path, "w") as fh:
        for i in range(n):
            ok = rng.random() < 0.4
            task_id, reason, run_dir = f"task-{i % 5000}", rng.choice(reasons), f"runs/r{i}"
            if traces:
                folder = path.parent / run_dir
                os.makedirs(folder)
                (folder / "manifest.json").write_text(json.dumps(manifest(f"r{i}", task_id, ok, reason)))
            fh.write(json.dumps({
                "task_id": task_id, "benchmark": rng.choice(["tau-bench", "gaia", "jsonl"]), "split": "test",
                "subset": None, "trial": i // 5000, "model": rng.choice(["gpt-4o-mini", "local"]), "prediction": "x" * 20,
                "success": ok, "score": 1.0 if ok else 0.0, "stop_reason": reason, "steps": rng.randint(1, 30),
                "latency_seconds": rng.random() * 20, "token_usage": {"prompt_tokens": 900, "completion_tokens": 100,
                                                                      "total_tokens": 1000, "cached_tokens": 0},
                "cost": 0.001, "trace_run_dir": run_dir, "run_spec_ref": RUN_SPEC_REF, "error": None,
                "metadata": {"reward": 1.0 if ok else 0.0},
            }) + "\n")


def wall(cmd: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1000:])
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--traces", choices=["with", "without", "both"], default="both")
    args = parser.parse_args()
    qit = [sys.executable, "-m", "qitos.cli.qit"]
    print(f"rows: {args.rows} ({args.rows / 1000:.0f}k)")
    print(f"python -c pass        : {wall([sys.executable, '-c', 'pass'])[0]:.3f} s")
    print(f"qit --help            : {wall([*qit, '--help'])[0]:.3f} s")
    for traces in ([True, False] if args.traces == "both" else [args.traces == "with"]):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "results.jsonl"
            started = time.perf_counter()
            make_rows(path, args.rows, traces)
            made = time.perf_counter() - started
            table, _ = wall([*qit, "bench", "eval", "--input", str(path)])
            as_json, out = wall([*qit, "bench", "eval", "--input", str(path), "--json"])
        mismatches = json.loads(out)["trace_mismatches"]
        what = "with traces   " if traces else "without traces"
        print(f"{what}: qit bench eval (table) {table:.3f} s (target < 2 s), --json {as_json:.3f} s; "
              f"{mismatches} rows do not match their trace (rows and traces written in {made:.1f} s)")


if __name__ == "__main__":
    main()

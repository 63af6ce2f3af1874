"""What every script in examples/benchmarks/ shares: the `qit bench run` flags they accept and the run itself.

A script builds the same `RunConfig` that `qit bench run` builds from the same flags and hands it to the same
runner (`plan_batch` then `execute_batch`), so its rows (results JSONL) and traces (`--trace-logdir`) are the
ones the CLI writes: resume, RunSpec fingerprint checks and official-run checks included. Copy a script and
change the `RunConfig` to script your own experiments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qitos.benchmark.base import LoadOptions
from qitos.run.config import ModelConfig, RunConfig
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.run.runner import execute_batch, plan_batch
from qitos.models.base import ModelConfigError


def arguments(description: str, **defaults: Any) -> argparse.ArgumentParser:
    """The common `qit bench run` flags, with this benchmark's defaults."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--split")
    p.add_argument("--subset")
    p.add_argument("--limit", type=int)
    p.add_argument("--task-ids", help="comma-separated task ids")
    p.add_argument("--root", type=Path, help="benchmark data root (file or folder)")
    p.add_argument("--data-dir", type=Path, help="data directory (default $QITOS_DATA_DIR)")
    p.add_argument("--option", "-o", action="extend", nargs="+", default=[],
                   help="benchmark options KEY=VALUE, several after one flag")
    p.add_argument("--recipe")
    p.add_argument("--model-name", default="local")
    p.add_argument("--base-url")
    p.add_argument("--user-model")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--output", type=Path)
    p.add_argument("--trace-logdir", type=Path, default=Path("runs"))
    p.add_argument("--dry-run", action="store_true", help="show the plan, run nothing")
    p.set_defaults(**defaults)
    return p


def run_config(benchmark: str, args: argparse.Namespace) -> RunConfig:
    """The RunConfig `qit bench run --benchmark <benchmark>` builds from the same flags."""
    bad = [pair for pair in args.option if "=" not in pair]
    if bad:
        print(f"error: --option '{bad[0]}' must look like KEY=VALUE")
        raise SystemExit(2)
    options = dict(pair.split("=", 1) for pair in args.option)
    if args.user_model:
        options["user_model"] = args.user_model
    load = LoadOptions(root=args.root, split=args.split, subset=args.subset, limit=args.limit, options=options,
                       task_ids=[t for t in (args.task_ids or "").split(",") if t] or None,
                       **({"data_dir": args.data_dir} if args.data_dir else {}))
    return RunConfig(benchmark=benchmark, load=load, recipe=args.recipe,
                     model=ModelConfig(model_name=args.model_name, base_url=args.base_url),
                     concurrency=args.concurrency, trials=args.trials, max_steps=args.max_steps,
                     output=args.output, trace_logdir=args.trace_logdir, dry_run=args.dry_run)


def run(cfg: RunConfig) -> int:
    """Plan, run and summarise; the exit code is `qit bench run`'s (see `BatchOutcome.exit_code`; 2 usage)."""
    try:
        plan = plan_batch(cfg)
    except (BenchmarkUsageError, ModelConfigError) as exc:
        print(f"error: {exc}")
        return 2
    for warning in plan.warnings:
        print(f"warning: {warning}")
    print(f"{cfg.benchmark} split={cfg.load.split}: {len(plan.jobs)} to run, {plan.skipped} already done; "
          f"results -> {plan.output}, traces -> {cfg.trace_logdir}/")
    if cfg.dry_run:
        return 0
    outcome = execute_batch(plan, on_row=lambda row: print(f"  {row.task_id} trial {row.trial}: "
                                                           f"{row.stop_reason} success={row.success}"))
    scored = [r for r in outcome.rows if r.success is not None]
    print(f"finished {len(outcome.rows)}; successes {sum(bool(r.success) for r in scored)}/{len(scored)} scored; "
          f"evaluate: qit bench eval --input {plan.output}")
    return outcome.exit_code

"""Re-execute a recorded benchmark run with the `replay` model and compare it step by step.

The task, benchmark options and recipe come from the run's manifest (RunSpec and
ExperimentSpec); the model answers are the recorded ones. For a deterministic environment the
new run must match exactly; otherwise the first diverging step and what differed are reported.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qitos.trace.reader import load_run, read_manifest

from qitos.benchmark.base import LoadOptions
from qitos.run.config import ModelConfig, RunConfig
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.run.job import run_job
from qitos.run.job_context import JobContext, resolve_recipe
from qitos.benchmark.registry import get_adapter


@dataclass
class ReplayReport:
    identical: bool
    steps: int
    first_divergence: int | None = None
    detail: str = ""
    new_run_dir: str | None = None


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def compare_runs(original: Path, replayed: Path) -> ReplayReport:
    a, b = load_run(original), load_run(replayed)
    for i, (sa, sb) in enumerate(zip(a.steps, b.steps), start=1):
        for field in ("decision", "observation", "state_diff"):
            va, vb = getattr(sa, field), getattr(sb, field)
            if va != vb:
                return ReplayReport(False, len(b.steps), i, f"{field} differs: recorded {_short(va)} vs replayed {_short(vb)}",
                                    str(replayed))
    if len(a.steps) != len(b.steps):
        i = min(len(a.steps), len(b.steps)) + 1
        return ReplayReport(False, len(b.steps), i, f"recorded {len(a.steps)} steps, replay made {len(b.steps)}", str(replayed))
    if a.manifest.summary.stop_reason != b.manifest.summary.stop_reason:
        return ReplayReport(False, len(b.steps), len(b.steps), f"stop reason {a.manifest.summary.stop_reason} vs "
                            f"{b.manifest.summary.stop_reason}", str(replayed))
    return ReplayReport(True, len(b.steps), new_run_dir=str(replayed))


def reexecute_run(run_dir: Path, trace_logdir: Path) -> ReplayReport:
    manifest = read_manifest(run_dir)
    spec = manifest.run_spec or {}
    exp = manifest.experiment_spec or {}
    if not manifest.benchmark_name:
        raise BenchmarkUsageError(f"{run_dir} is not a benchmark run; --reexecute needs a run made by `qit bench run`")
    meta = spec.get("metadata") or {}
    bench_meta = exp.get("benchmark_metadata") or {}
    recipe = meta.get("recipe") or ""
    load = LoadOptions(root=bench_meta.get("root"), split=manifest.benchmark_split, subset=spec.get("benchmark_subset"),
                       task_ids=[manifest.task["id"]], variant=meta.get("variant"), options=meta.get("options") or {})
    budget = spec.get("budget") or {}
    cfg = RunConfig(
        benchmark=manifest.benchmark_name, load=load,
        recipe=None if recipe.startswith("runner:") else recipe,
        runner=recipe.split(":", 1)[1] if recipe.startswith("runner:") else None,
        model=ModelConfig(model_name=f"replay:{run_dir}", seed=manifest.seed or 0),
        max_steps=budget.get("max_steps"), task_timeout=budget.get("max_runtime_seconds"), trace_logdir=trace_logdir,
        parse_error_limit=(spec.get("stop_criteria") or {}).get("parse_error_limit", 3),
        tool_error_limit=(spec.get("stop_criteria") or {}).get("tool_error_limit", 5),
    )
    adapter = get_adapter(cfg.benchmark)
    tasks = adapter.load_tasks(load)
    from qitos.spec.run_spec import ExperimentSpec

    experiment = ExperimentSpec.model_validate(exp) if exp else None
    ctx = JobContext(cfg, adapter, resolve_recipe(adapter, cfg), spec.get("dataset_digest") or "", experiment,
                     cfg.model.build, threading.Event())
    # one replay model per run: recipes that build extra models (a simulated user) get replays too
    row = run_job(ctx, tasks[0], 0)
    if row is None or not row.trace_run_dir:
        raise BenchmarkUsageError(f"re-execution of {run_dir} produced no trace ({row.stop_reason if row else 'cancelled'}: "
                                  f"{(row.error or '')[:300] if row else ''})")
    return compare_runs(run_dir, Path(row.trace_run_dir))

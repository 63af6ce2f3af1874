"""The batch runner behind `qit bench run`: select tasks, resume, execute, append rows.

Order of work: load adapter and tasks → dataset digest and ExperimentSpec → RunSpec
fingerprint (refuse a results file written under another one unless `force`) → skip finished
task × trial pairs → execute → append each row as it finishes (flushed and fsynced).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from qitos.core.engine import make_run_spec
from qitos.core.task import Task
from qitos.spec.run_spec import ExperimentSpec, RunSpec

from .base import BenchmarkAdapter
from .config import RunConfig
from .errors import BenchmarkUsageError
from .executors import run_local, run_ray
from .job import JobContext, batch_model_provider, prepared_task, resolve_recipe
from .registry import get_adapter
from .results import NOT_DONE_REASONS, BenchmarkRunResult, ResultsFile
from .workers import run_workers


@dataclass
class BatchPlan:
    cfg: RunConfig
    adapter: BenchmarkAdapter
    tasks: list[Task]
    jobs: list[tuple[Task, int]]
    skipped: int
    output: Path
    run_spec: RunSpec
    experiment: ExperimentSpec
    ctx: JobContext


@dataclass
class BatchOutcome:
    rows: list[BenchmarkRunResult] = field(default_factory=list)
    cancelled: bool = False


def experiment_spec(cfg: RunConfig, tasks: list[Task], recipe_name: str) -> ExperimentSpec:
    ids_digest = hashlib.sha256("\n".join(t.id for t in tasks).encode()).hexdigest()[:16]
    return ExperimentSpec(
        name=ExperimentSpec.default_name(cfg.benchmark, cfg.load.split, cfg.load.subset),
        benchmark_name=cfg.benchmark, benchmark_split=cfg.load.split,
        benchmark_metadata={"subset": cfg.load.subset, "limit": cfg.load.limit, "trials": cfg.trials,
                            "task_ids_digest": ids_digest, "task_count": len(tasks), "variant": cfg.load.variant,
                            "root": str(cfg.load.root) if cfg.load.root else None, "options": cfg.load.options},
        run_defaults={"recipe": recipe_name, "max_steps": cfg.max_steps, "task_timeout": cfg.task_timeout,
                      "concurrency": cfg.concurrency, "executor": cfg.executor, "workers": cfg.workers},
    )


def _probe_run_spec(ctx: JobContext, tasks: list[Task], model) -> RunSpec:
    """Build the agent for a first task to learn the RunSpec every row of this batch will carry."""
    cfg, adapter = ctx.cfg, ctx.adapter
    for task in tasks:  # the first task that can be set up here (cheap: probes stage nothing)
        task = prepared_task(adapter, cfg, task)
        with tempfile.TemporaryDirectory(prefix="qitos-probe-") as tmp:
            try:
                runtime = adapter.probe_runtime(task, cfg.load, Path(tmp))
            except Exception:  # noqa: BLE001 - the job itself will report the setup failure
                continue
            try:
                if runtime.unavailable:
                    continue
                agent = ctx.recipe.build(ctx.recipe_context(task, runtime))
                return make_run_spec(agent, model, seed=cfg.model.seed, budget=task.budget.model_dump(),
                                     stop_criteria={"parse_error_limit": cfg.parse_error_limit,
                                                    "tool_error_limit": cfg.tool_error_limit},
                                     executor=cfg.executor, **ctx.run_spec_extra())
            finally:
                adapter.cleanup(runtime)
    return RunSpec(model_name=model.name, model_family=model.family, seed=cfg.model.seed, **ctx.run_spec_extra())


def _what_changed(existing: list[dict], spec: RunSpec) -> list[str]:
    """What differs between this run's RunSpec and the one in the trace of the file's last row."""
    import json

    from qitos.spec.run_spec import spec_differences

    for row in reversed(existing):
        run_dir = row.get("trace_run_dir")
        if not run_dir:
            continue
        try:
            old = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8")).get("run_spec") or {}
        except (OSError, ValueError):
            continue
        return spec_differences(old, spec.model_dump(mode="json"))
    return []


def _check_workers(cfg: RunConfig) -> None:
    if cfg.workers < 1:
        raise BenchmarkUsageError("--workers must be at least 1")
    if cfg.workers == 1:
        return
    if cfg.executor != "local":
        raise BenchmarkUsageError("--workers is for the local executor; with --executor ray, Ray places the tasks")
    if cfg.workers > cfg.concurrency:
        raise BenchmarkUsageError(f"--workers {cfg.workers} exceeds --concurrency {cfg.concurrency}: each worker "
                                  "needs at least one task in flight")
    if not hasattr(os, "fork"):
        raise BenchmarkUsageError("--workers > 1 needs a system with fork (Linux); use --executor ray instead")


def plan_batch(cfg: RunConfig) -> BatchPlan:
    adapter = get_adapter(cfg.benchmark)
    if cfg.load.split is None:
        cfg.load.split = adapter.default_split
    if cfg.trials < 1 or cfg.concurrency < 1:
        raise BenchmarkUsageError("--trials and --concurrency must be at least 1")
    if cfg.load.limit is not None and cfg.load.limit < 1:
        raise BenchmarkUsageError(f"--limit {cfg.load.limit}: must be at least 1 (leave it out to run every task)")
    if cfg.executor not in ("local", "ray"):
        raise BenchmarkUsageError(f"--executor '{cfg.executor}' is not known; use local or ray")
    _check_workers(cfg)
    recipe = resolve_recipe(adapter, cfg)
    tasks = adapter.load_tasks(cfg.load)
    if not tasks:
        raise BenchmarkUsageError(f"no tasks selected for {cfg.benchmark} split={cfg.load.split} subset={cfg.load.subset}")
    # the digest names the dataset (split/subset), not the selection: --limit/--task-ids live in the ExperimentSpec
    whole = tasks if not (cfg.load.limit or cfg.load.task_ids) else adapter.load_tasks(
        cfg.load.model_copy(update={"limit": None, "task_ids": None}))
    digest = adapter.dataset_digest(cfg.load, whole)
    experiment = experiment_spec(cfg, tasks, recipe.name)
    provider = batch_model_provider(cfg, recipe, preflight=True)
    ctx = JobContext(cfg, adapter, recipe, digest, experiment, provider, threading.Event(), selected_tasks=len(tasks))
    spec = _probe_run_spec(ctx, tasks, provider())
    ctx.run_spec_ref = spec.fingerprint()
    output = cfg.output or cfg.default_output()
    results = ResultsFile(output)
    existing = results.existing()
    refs = {r.get("run_spec_ref") for r in existing if r.get("run_spec_ref")}
    if refs and spec.fingerprint() not in refs and not cfg.force:
        changed = _what_changed(existing, spec)
        raise BenchmarkUsageError(
            f"{output} holds results of another configuration (RunSpec {', '.join(sorted(refs))}; this run is "
            f"{spec.fingerprint()}{'; changed: ' + '; '.join(changed) if changed else ''}). "
            "Use another --output, or --force to append anyway.")
    errored = {(r["task_id"], int(r.get("trial", 0))) for r in existing if r.get("stop_reason") == "error"}
    if cfg.retry_errors and errored:
        results.rewrite_without(errored)
        existing = results.existing()
    done = {(r["task_id"], int(r.get("trial", 0))) for r in existing if r.get("stop_reason") not in NOT_DONE_REASONS}
    all_jobs = [(t, trial) for trial in range(cfg.trials) for t in tasks]
    jobs = [(t, trial) for t, trial in all_jobs if (t.id, trial) not in done]
    return BatchPlan(cfg, adapter, tasks, jobs, len(all_jobs) - len(jobs), output, spec, experiment, ctx)


def execute_batch(plan: BatchPlan, on_row: Callable[[BenchmarkRunResult], None] | None = None) -> BatchOutcome:
    """Run the planned jobs; rows are appended as they finish. Ctrl-C returns with `cancelled=True`."""
    results = ResultsFile(plan.output)
    outcome = BatchOutcome()
    lock = threading.Lock()

    def on_result(task: Task, trial: int, row: BenchmarkRunResult | None) -> None:
        if row is None:
            return
        results.append(row)
        with lock:
            outcome.rows.append(row)
        if on_row:
            on_row(row)

    try:
        if plan.cfg.executor == "ray":
            run_ray(plan.ctx, plan.jobs, plan.cfg.concurrency, on_result, plan.cfg.ray_address)
        elif plan.cfg.workers > 1:
            run_workers(plan.ctx, plan.jobs, plan.cfg.concurrency, plan.cfg.workers, on_result)
        else:
            run_local(plan.ctx, plan.jobs, plan.cfg.concurrency, on_result)
    except KeyboardInterrupt:
        outcome.cancelled = True
    return outcome

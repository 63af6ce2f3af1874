"""The batch runner behind `qit bench run`: select tasks, resume, execute, append rows.

Order of work: load adapter and tasks → dataset digest and ExperimentSpec → RunSpec
fingerprint (refuse a results file written under another one unless `force`) → skip finished
task × trial pairs → execute → append each row as it finishes (flushed and fsynced).
"""

from __future__ import annotations

import hashlib
import os
import signal
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable

from qitos.core.engine import make_run_spec
from qitos.core.stop import OUTSIDE_AGENT, StopReason, status_of
from qitos.core.task import Task
from qitos.spec.run_spec import ExperimentSpec, RunSpec

from qitos.benchmark.base import BenchmarkAdapter
from qitos.run.budgets import check_budgets
from qitos.results.commit import RowCommitter, row_paths
from qitos.run.config import RunConfig
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.run.cluster.connect import ray_log
from qitos.run.executors import connect_ray, run_local, run_ray
from qitos.run.job import seal
from qitos.run.job_context import JobContext, batch_model_provider, prepared_task, resolve_recipe
from qitos.run.lifetime import exit_code_for, signal_of
from qitos.benchmark.registry import canonical_name, get_adapter
from qitos.results.rows import NOT_DONE_REASONS, BenchmarkRunResult, ResultsFile
from qitos.results.trace_check import trace_run_spec
from qitos.run.lock import RunLock
from qitos.results.tail import warnings_for as cut_warnings
from qitos.results.tally import RunTally
from qitos.core.task_list import JobList, TaskList, task_ids
from qitos.run.workers import run_workers


@dataclass
class BatchPlan:
    cfg: RunConfig
    adapter: BenchmarkAdapter
    tasks: Sequence[Task]  # compact where they can be (task_list.py): `tasks[i]` rebuilds one
    jobs: Sequence[tuple[Task, int]]
    skipped: int
    output: Path
    run_spec: RunSpec
    experiment: ExperimentSpec
    ctx: JobContext
    warnings: list[str] = field(default_factory=list)  # said once, before the run (e.g. flags a recipe ignores)
    lock: RunLock | None = None  # held from planning to the end of the run (none for --dry-run)
    outside_rerun: int = 0  # rows of an earlier run that failed outside the agent, taken out to run again


EXIT_INCOMPLETE = 3  # tasks are missing or failed outside the agent: rerun the same command to complete them


@dataclass
class BatchOutcome:
    tally: RunTally = field(default_factory=RunTally)  # counts of the finished rows (what the summary needs)
    rows: list[BenchmarkRunResult] = field(default_factory=list)  # the rows themselves, when asked to keep them
    cancelled: bool = False
    stop_signal: int = signal.SIGINT  # what cancelled the batch
    planned: int = 0  # jobs the batch set out to run
    died: list[str] = field(default_factory=list)  # worker processes that died while running jobs, said how

    @property
    def missing(self) -> int:
        """Jobs that ended with no row (their worker died before taking or finishing them)."""
        return 0 if self.cancelled else max(0, self.planned - self.tally.finished)

    @property
    def outside(self) -> int:
        return sum(self.tally.outside.values())

    @property
    def exit_code(self) -> int:
        """128 + the signal when cancelled (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP; rerun to resume); 1 every row
        failed to run; 3 tasks are missing or failed outside the agent (rerun to complete them); else 0: tasks
        the agent got wrong, rows ending `error` (raised in the agent's code) or `requires_unavailable` are
        results, counted by `qit bench eval`."""
        if self.cancelled:
            return exit_code_for(self.stop_signal)
        if self.tally.finished and not self.missing and self.tally.failed == self.tally.finished:
            return 1
        if self.missing or self.outside:
            return EXIT_INCOMPLETE
        return 0


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


def _first_probe(ctx: JobContext, tasks: list[Task], use: Callable[[Task, Any], Any]) -> tuple[Task, Any] | None:
    """`use(task, runtime)` on the first task that can be set up here (cheap: probes stage nothing), its runtime
    cleaned up after; None when no task can."""
    cfg, adapter = ctx.cfg, ctx.adapter
    for task in tasks:
        task = prepared_task(adapter, cfg, task)
        with tempfile.TemporaryDirectory(prefix="qitos-probe-") as tmp:
            try:
                runtime = adapter.probe_runtime(task, cfg.load, Path(tmp))
            except Exception:  # noqa: BLE001 - the job itself will report the setup failure
                continue
            try:
                if not runtime.unavailable:
                    return task, use(task, runtime)
            finally:
                adapter.cleanup(runtime)
    return None


def _probe_run_spec(ctx: JobContext, tasks: list[Task], model) -> RunSpec:
    """Build the agent for a first task to learn the RunSpec every row of this batch will carry."""
    cfg = ctx.cfg
    if ctx.split:
        return _described_run_spec(ctx, tasks)
    found = _first_probe(ctx, tasks, lambda task, runtime: make_run_spec(
        ctx.recipe.build(ctx.recipe_context(task, runtime)), model, seed=cfg.model.seed,
        budget=task.budget.model_dump(),
        stop_criteria={"parse_error_limit": cfg.parse_error_limit, "tool_error_limit": cfg.tool_error_limit},
        executor=cfg.executor, **ctx.run_spec_extra()))
    if found is not None:
        return found[1]
    return RunSpec(model_name=model.name, model_family=model.family, seed=cfg.model.seed, **ctx.run_spec_extra())


def _described_run_spec(ctx: JobContext, tasks: list[Task]) -> RunSpec:
    """The RunSpec of a split batch: the agent side builds the agent for a first task and describes it.

    The agent host started for this stays for the jobs when it shows them the same view (see execute_batch)."""
    from qitos.run.sides.scoring import describe_agent
    from qitos.run.sides.trusted_spec import trusted_run_spec

    found = _first_probe(ctx, tasks, lambda task, runtime: describe_agent(ctx, task, runtime))
    if found is None:
        return trusted_run_spec(ctx, tasks[0], {})
    task, outcome = found
    if outcome.stop_reason == StopReason.AGENT_PROCESS_DIED.value:
        from qitos.run.sides.host import AgentHostError

        raise AgentHostError(f"while planning: {(outcome.error or '').splitlines()[0]}")
    if outcome.description is None:
        raise BenchmarkUsageError(f"the agent could not be built for task '{task.id}': "
                                  f"{(outcome.error or 'no reason given').splitlines()[0]}")
    return trusted_run_spec(ctx, task, outcome.description)


TASKS_PER_WORKER = 16  # threads of one process queue for its interpreter lock beyond about this many in flight


SPLIT_TASKS_PER_WORKER = 1  # a split batch: a worker per task in flight (at most one per core) ...
SPLIT_JOBS_PER_WORKER = 128  # ... and the batch has 128 jobs per worker to pay the planning its agent host costs


def auto_workers(cfg: RunConfig, split: bool = False, jobs: int | None = None) -> int:
    """`--workers auto`: one process per 16 tasks in flight, at most two per core; for a split batch (each worker is
    a scoring process and its agent host), one per core, per task in flight and per 128 jobs.

    Measured by benchmarks/harness_overhead.py on 2 cores (unsplit, 200 ms model latency, 64 in flight: one
    process 1.3-1.9x the latency floor, four about 1.15x) and for split batches by benchmarks/scale.py's workload
    (jsonl, N=1,024, 16 in flight): at zero latency two workers took 7.9-8.5 s where one took 11.2-12.3 s. The other
    workers' agent hosts start while the batch is planned (each worker adopts one), so a second worker costs the
    planning about 0.3 s of CPU: on harness_overhead.py's workload two workers took 1.89 s where one took 3.11 s
    (N=256, 16 in flight, zero latency; whole command 3.8 s against 5.3 s) and 5.09 s against 6.69 s (N=512, 64 in
    flight, 200 ms), hence one per 128 jobs (below that the planning's share outweighs the gain); with few in flight
    too (N=1,000, zero latency: 2 in flight, 9.1 s against 10.4 s; 4 in flight, 10.5 s against 12.4 s). The embedded
    llama.cpp model stays in one process (each worker would load its own copy and compete for the same cores), and so
    does Ray.
    """
    if cfg.executor != "local" or not hasattr(os, "fork") or cfg.model.embedded:
        return 1
    cores = os.cpu_count() or 1
    if split:
        by_jobs = cores if jobs is None else jobs // SPLIT_JOBS_PER_WORKER
        return max(1, min(cfg.concurrency // SPLIT_TASKS_PER_WORKER, cores, by_jobs))
    return max(1, min(cfg.concurrency // TASKS_PER_WORKER, 2 * cores))


def _what_changed(existing: list[dict], spec: RunSpec, adapter: BenchmarkAdapter) -> list[str]:
    """What differs between this run's RunSpec and the one in the trace of the file's last rows (defaults an
    older file did not record filled in, and said so: see `defaults`)."""
    from qitos.spec.run_spec import spec_differences

    from qitos.run.defaults import predates_defaults, with_defaults

    old = trace_run_spec(reversed(existing))
    if old is None:
        return []
    new = spec.model_dump(mode="json")
    filled = with_defaults(old, new, adapter.resolve_options)
    changed = spec_differences(filled, new)
    if predates_defaults(old, filled):
        changed.insert(0, "the file was written before runs recorded their defaults (subset, variant, every "
                          "option)" + ("; nothing else" if not changed else ""))
    return changed


def _check_workers(cfg: RunConfig, split: bool = False, jobs: int | None = None) -> None:
    """Resolve `auto` (once the number of jobs is known) and refuse settings that cannot work, before anything runs."""
    if isinstance(cfg.workers, str):
        if cfg.workers.strip().lower() == "auto":
            if jobs is not None:
                cfg.workers = auto_workers(cfg, split, jobs)
            return
        if not cfg.workers.strip().isdigit():
            raise BenchmarkUsageError(f"--workers '{cfg.workers}' must be a number of processes or auto")
        cfg.workers = int(cfg.workers)
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


def _ignored_model_flags(cfg: RunConfig, recipe: str, needs_model: bool) -> list[str]:
    """A recipe that calls no model (an oracle) ignores the model flags: say so instead of ignoring them silently."""
    m = cfg.model
    given = [flag for flag, value in (("--model-name", m.model_name if m.model_name != "local" else None),
                                      ("--base-url", m.base_url), ("--temperature", m.temperature),
                                      ("--max-tokens", m.max_tokens),
                                      ("--user-model", cfg.load.options.get("user_model"))) if value is not None]
    if needs_model or not given:
        return []
    return [f"recipe '{recipe}' calls no model: {', '.join(given)} ignored (traces and rows record model none)"]


def plan_batch(cfg: RunConfig) -> BatchPlan:
    adapter = get_adapter(cfg.benchmark)
    cfg.benchmark = canonical_name(cfg.benchmark)  # rows, traces and the default output use the canonical name
    check_budgets(cfg)
    cfg.load = adapter.resolve_load(cfg.load)  # defaults written in: the RunSpec and rows record what ran
    if cfg.executor not in ("local", "ray"):
        raise BenchmarkUsageError(f"--executor '{cfg.executor}' is not known; use local or ray")
    if cfg.ray_resources and cfg.executor != "ray":
        raise BenchmarkUsageError("--ray-resources is for --executor ray (the local executor places nothing)")
    if cfg.agent_processes not in (None, "task", "batch"):
        raise BenchmarkUsageError(f"--agent-processes {cfg.agent_processes}: use task or batch")
    recipe = resolve_recipe(adapter, cfg)
    if not cfg.runner:
        cfg.recipe = recipe.name  # named when left out too: the default output file is the same either way
    if recipe.needs_model:  # vllm/..., sglang/..., llamacpp/...: a server started around the jobs (execute_batch)
        from qitos.run.model_server import plan as plan_server

        cfg.model = plan_server(cfg.model)
        if cfg.model.server and cfg.executor == "ray":
            raise BenchmarkUsageError(f"--model-name {cfg.model.server['requested']} starts a server on this "
                                      "machine's loopback, which Ray workers elsewhere cannot reach; serve it "
                                      "yourself and pass --base-url")
    _check_workers(cfg, split=adapter.split_sides and recipe.official)
    warnings = _ignored_model_flags(cfg, recipe.name, recipe.needs_model)
    tasks = adapter.load_tasks(cfg.load)
    warnings.extend(getattr(adapter, "load_warnings", ()))  # e.g. jsonl rows with no answer (run unscored)
    if not tasks:
        raise BenchmarkUsageError(f"no tasks selected for {cfg.benchmark} split={cfg.load.split} subset={cfg.load.subset}")
    _check_workers(cfg, split=adapter.split_sides and recipe.official, jobs=len(tasks) * cfg.trials)
    # the digest names the dataset (split/subset), not the selection: --limit/--task-ids live in the ExperimentSpec
    whole = tasks if not (cfg.load.limit or cfg.load.task_ids) else adapter.load_tasks(
        cfg.load.model_copy(update={"limit": None, "task_ids": None}))
    digest = adapter.dataset_digest(cfg.load, whole)
    experiment = experiment_spec(cfg, tasks, recipe.name)
    output = cfg.output or cfg.default_output()
    ctx, lock = None, None
    try:
        provider = batch_model_provider(cfg, recipe, preflight=True)
        ctx = JobContext(cfg, adapter, recipe, digest, experiment, provider, threading.Event(),
                         selected_tasks=len(tasks))
        if ctx.split and isinstance(cfg.workers, int) and cfg.workers > 1 and not cfg.dry_run:
            # the other workers' agent hosts start now, importing while this process plans (each worker adopts
            # one after the fork: workers.py), instead of one by one at each worker's first job
            from qitos.run.sides.host import AgentHost

            ctx.spare_hosts = [AgentHost(ctx.host_settings()).spawn() for _ in range(cfg.workers - 1)]
        spec = _probe_run_spec(ctx, tasks, provider())
        ctx.run_spec_ref, ctx.model_id = spec.fingerprint(), spec.model_name
        if ctx.split and not ctx.agent_host().confined:
            warnings.append(f"the agent side is not confined ({ctx.agent_host().isolation_detail.split(': ', 1)[-1]})"
                            ": it runs in a separate process, and no run of this batch is official (agent_isolated)")
        # one run per results file: taken before the file is read, after every check a refused run fails first
        lock = None if cfg.dry_run else RunLock(output).acquire()
        return _resume(cfg, adapter, tasks, spec, experiment, ctx, warnings, output, lock)
    except BaseException:
        if ctx is not None:  # e.g. the agent host died while describing the agent
            _close_hosts(ctx)
        if lock is not None:
            lock.release()
        raise


def _resume(cfg: RunConfig, adapter: BenchmarkAdapter, tasks: list[Task], spec: RunSpec, experiment: ExperimentSpec,
            ctx: JobContext, warnings: list[str], output: Path, lock: RunLock | None) -> BatchPlan:
    """The jobs left to run in `output`: refuse another configuration, repair cut rows, take out the rows to run
    again (failed outside the agent; with --retry-errors, errors too), skip the rest."""
    results = ResultsFile(output)
    existing = results.existing()
    refs = {r.get("run_spec_ref") for r in existing if r.get("run_spec_ref")}
    if refs and spec.fingerprint() not in refs and not cfg.force:
        changed = _what_changed(existing, spec, adapter)
        raise BenchmarkUsageError(
            f"{output} holds results of another configuration (RunSpec {', '.join(sorted(refs))}; this run is "
            f"{spec.fingerprint()}{'; changed: ' + '; '.join(changed) if changed else ''}). "
            "Use another --output, or --force to append anyway.")
    cut = results.repair() if results.cut and not cfg.dry_run else results.cut  # rows a crash cut short
    if not cfg.dry_run:
        _seal_tail(existing)
    tasks = TaskList.of(tasks)  # held until the run ends: compact (core/task_list.py)
    ids = task_ids(tasks)
    all_jobs = [(index, trial) for trial in range(cfg.trials) for index in range(len(ids))]
    selected = {(ids[index], trial) for index, trial in all_jobs}
    again = {"error"} if cfg.retry_errors else set()
    outside = [r for r in existing if r.get("stop_reason") in OUTSIDE_AGENT and _key(r) in selected]
    drop = {_key(r) for r in existing if r.get("stop_reason") in again} | {_key(r) for r in outside}
    if drop and not cfg.dry_run:
        results.rewrite_without(drop)
        existing = results.existing()
    if outside:
        warnings.append(f"{len(outside)} row(s) failed outside the agent "
                        f"({', '.join(sorted({r['stop_reason'] for r in outside}))}); "
                        f"{'this run would run' if cfg.dry_run else 'running'} them again")
    done = {_key(r) for r in existing if r.get("stop_reason") not in NOT_DONE_REASONS and _key(r) not in drop}
    left = [(index, trial) for index, trial in all_jobs if (ids[index], trial) not in done]
    jobs = JobList(tasks, left)
    warnings.extend(cut_warnings(output, cut, {(ids[index], trial) for index, trial in left}, cfg.dry_run))
    if cfg.executor == "ray" and jobs and not cfg.dry_run:
        log = ray_log(output)  # Ray's own output, from the connect on: not the terminal
        kept = log.exists()
        try:
            connect_ray(cfg.ray_address, log)  # last check before anything is written: a cluster that is not there
            from qitos.run.cluster.placement import check_placement

            check_placement(cfg, adapter, [t for t, _ in jobs])  # ... or no node with what a task needs
        except BaseException:
            if not kept:  # a refused run leaves nothing beside the results
                log.unlink(missing_ok=True)
            raise
    return BatchPlan(cfg, adapter, tasks, jobs, len(all_jobs) - len(jobs), output, spec, experiment, ctx, warnings,
                     lock, len(outside))


SEAL_TAIL_ROWS = 256  # more than the jobs ever in flight at once: where a kill can fall between a row and its seal


def _seal_tail(existing: list[dict]) -> None:
    """A kill between a row's append and its trace's seal leaves a trace saying `running` (interrupted) for a task
    whose row is saved: the row is durable, so its trace may say it is complete now. Only the last rows can be
    in that window."""
    from qitos.trace.writer import seal_trace

    for row in existing[-SEAL_TAIL_ROWS:]:
        if row.get("trace_run_dir"):
            seal_trace(row["trace_run_dir"], status_of)


def _key(row: dict) -> tuple[str, int]:
    return row["task_id"], int(row.get("trial", 0))


def _close_hosts(ctx: JobContext) -> None:
    """End the batch's agent hosts: this process's and those spawned for workers that did not take them."""
    for host in [ctx.host, *ctx.spare_hosts]:
        if host is not None:
            host.close()
    ctx.host, ctx.spare_hosts = None, []


def execute_batch(plan: BatchPlan, on_row: Callable[[BenchmarkRunResult], None] | None = None,
                  keep_rows: bool = True) -> BatchOutcome:
    """Run the planned jobs; rows are appended as they finish. Ctrl-C returns with `cancelled=True`.

    The outcome counts the rows (`tally`); it also holds them (`rows`) unless `keep_rows` is False, as the CLI
    runs: a large batch then keeps nothing per row in memory (the results file has them all)."""
    results = ResultsFile(plan.output)
    outcome = BatchOutcome(planned=len(plan.jobs))
    lock = threading.Lock()

    def seen(task: Task, trial: int, row: BenchmarkRunResult | None) -> None:
        """A row already saved: count it and show it."""
        if row is None:
            return
        with lock:
            outcome.tally.add(row)
            if keep_rows:
                outcome.rows.append(row)
        if on_row:
            on_row(row)

    def committed(task: Task, trial: int, row: BenchmarkRunResult) -> None:
        seal(row)  # the row is durable: its trace may say the run is complete
        seen(task, trial, row)  # ... and the task is reported finished

    committer = RowCommitter(committed)

    def on_result(task: Task, trial: int, row: BenchmarkRunResult | None) -> None:
        if row is not None:  # written now; the committer waits for the disk, not the job's slot (commit.py)
            results.append(row, wait=False)
            committer.submit(row_paths(results.path, row.trace_run_dir), task, trial, row)

    if plan.ctx.split:  # exist before the agent host starts, so it can mask them
        plan.output.parent.mkdir(parents=True, exist_ok=True)
        plan.output.touch(exist_ok=True)
        Path(plan.cfg.trace_logdir).mkdir(parents=True, exist_ok=True)
        host = plan.ctx.host
        if host is not None and not host.serves(plan.ctx.host_settings()):  # it would show them: new ones
            _close_hosts(plan.ctx)
    from qitos.run.model_server import serving

    model = plan.cfg.model
    try:
        with serving(model.server, start=bool(plan.jobs), logdir=plan.cfg.trace_logdir, timeout=model.serve_timeout):
            if plan.cfg.executor == "ray":
                run_ray(plan.ctx, plan.jobs, plan.cfg.concurrency, on_result, plan.cfg.ray_address)
            elif plan.cfg.workers > 1:
                outcome.died = run_workers(plan.ctx, plan.jobs, plan.cfg.concurrency, plan.cfg.workers, seen,
                                           results.append)
            else:
                run_local(plan.ctx, plan.jobs, plan.cfg.concurrency, on_result)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (lifetime.Stopped)
        outcome.cancelled = True
        outcome.stop_signal = signal_of(exc)
    finally:
        try:
            committer.drain()  # every row written is durable, its trace sealed and counted before this returns
        finally:
            _close_hosts(plan.ctx)
            if plan.lock is not None:
                plan.lock.release()
    return outcome

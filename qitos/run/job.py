"""One task × trial, fully isolated: prepare → agent + Engine → evaluate → one result row → cleanup.

Whatever happens inside (setup failure, missing requirement, crash in the agent or the
evaluator), the job returns a row and cleans up; only a cancelled job returns no row, so a
rerun picks it up again.
"""

from __future__ import annotations

import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

from qitos.core.engine import Engine, RunResult
from qitos.core.stop import StopReason, outside_agent, status_of
from qitos.core.task import Task

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.floor import task_floor, with_floor
from qitos.run.outside import disk_full
from qitos.results.rows import BenchmarkRunResult
from qitos.run.job_context import JobContext, prepared_task


def _row(ctx: JobContext, task: Task, trial: int, stop_reason: str, **fields: Any) -> BenchmarkRunResult:
    cfg = ctx.cfg
    model = (ctx.model_id or cfg.model.model_name) if ctx.recipe.needs_model else None  # oracles call no model
    if not fields.get("metadata"):  # a row the evaluator never saw keeps the task's own (public) metadata,
        fields["metadata"] = dict(task.metadata)  # so per-level/category figures still count it
    # whether an agent doing nothing would succeed here, by the benchmark's rule (scoring side; floor.py)
    fields["metadata"] = with_floor(fields["metadata"], task_floor(ctx.adapter, task, cfg.load))
    fields["run_spec_ref"] = fields.get("run_spec_ref") or ctx.run_spec_ref  # and stays in its configuration
    return BenchmarkRunResult(task_id=task.id, benchmark=cfg.benchmark, split=cfg.load.split, subset=cfg.load.subset,
                              trial=trial, model=model, recipe=ctx.recipe.name, selected_tasks=ctx.selected_tasks,
                              trials_requested=cfg.trials, stop_reason=stop_reason, **fields)


def run_job(ctx: JobContext, task: Task, trial: int, trace_logdir: Path | None = None) -> BenchmarkRunResult | None:
    cfg, adapter = ctx.cfg, ctx.adapter
    task = prepared_task(adapter, cfg, task)
    workdir = (Path(tempfile.mkdtemp(prefix="qitos-task-")) if adapter.needs_workdir
               else Path(tempfile.gettempdir()) / "qitos-task-unused")
    runtime: TaskRuntime | None = None
    try:
        refused = ctx.recipe.unavailable(task) if ctx.recipe.unavailable is not None else None
        if refused:
            return _row(ctx, task, trial, StopReason.REQUIRES_UNAVAILABLE.value, error=refused)
        try:
            prepare = adapter.prepare_scoring_side if ctx.split else adapter.prepare
            runtime = prepare(task, trial, cfg.load, workdir)
        except Exception as exc:  # noqa: BLE001 - setup failures are rows, not crashes
            return _row(ctx, task, trial, StopReason.SETUP_FAILED.value,
                        error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        if runtime.unavailable:
            return _row(ctx, task, trial, StopReason.REQUIRES_UNAVAILABLE.value, error=runtime.unavailable)
        runtime.make_model = ctx.model_factory()  # scoring-side services' models (e.g. a simulated user's)
        verdict = _Verdict(ctx, task, runtime)
        if ctx.split:
            from qitos.run.sides.scoring import run_split

            result = run_split(ctx, task, trial, runtime, Path(trace_logdir or cfg.trace_logdir), verdict)
        else:
            result = _run_engine(ctx, task, trial, runtime, trace_logdir or cfg.trace_logdir, verdict)
        if result.stop_reason is StopReason.CANCELLED:
            return None
        return _evaluated_row(ctx, task, trial, result, verdict)
    except Exception as exc:  # noqa: BLE001 - e.g. the recipe failed to build
        from qitos.run.sides.host import AgentHostError

        reason = (StopReason.DISK_FULL if disk_full(exc) else
                  StopReason.AGENT_PROCESS_DIED if isinstance(exc, AgentHostError) else StopReason.ERROR)
        return _row(ctx, task, trial, reason.value, error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    finally:
        if runtime is not None:
            try:
                adapter.cleanup(runtime)
            except Exception:  # noqa: BLE001 - cleanup problems must not lose the row
                pass
        if adapter.needs_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def seal(row: BenchmarkRunResult) -> None:
    """The row is durable: its trace may now say the run is complete (see `TraceWriter.hold_status`)."""
    if row.trace_run_dir:
        from qitos.trace.writer import seal_trace

        seal_trace(row.trace_run_dir, status_of)


class _Verdict:
    """The benchmark's evaluation, run by the engine just before the final manifest write so the outcome is
    recorded in it (no second rewrite); an evaluator crash is kept for the row instead of raised."""

    def __init__(self, ctx: JobContext, task: Task, runtime: TaskRuntime) -> None:
        self.ctx, self.task, self.runtime = ctx, task, runtime
        self.evaluation: Any = None
        self.error: str | None = None

    def __call__(self, result: RunResult) -> dict[str, Any] | None:
        if result.stop_reason is StopReason.CANCELLED or outside_agent(result.stop_reason):
            return None  # cancelled: no row; the machine failed: an unscored row. Either way a rerun does it again
        try:
            self.evaluation = self.ctx.adapter.evaluate(self.task, result, self.runtime)
        except Exception as exc:  # noqa: BLE001 - an evaluator crash is recorded on the row
            self.error = f"evaluation failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            return None
        recorded = {"success": self.evaluation.success, "score": self.evaluation.score,
                    "final_answer": result.final_answer}  # what `qit bench eval` scores again (rescore.py)
        subtasks = (self.evaluation.metadata or {}).get("subtasks")
        if isinstance(subtasks, list):  # CyBench: the answer given to each question
            recorded["answers"] = [s.get("prediction") for s in subtasks if isinstance(s, dict)]
        return recorded


def _run_engine(ctx: JobContext, task: Task, trial: int, runtime: TaskRuntime, trace_logdir: Path,
                verdict: _Verdict) -> RunResult:
    recipe_ctx = ctx.recipe_context(task, runtime)
    agent = ctx.recipe.build(recipe_ctx)
    ctx.adapter.agent_built(recipe_ctx, agent)
    engine = Engine(
        agent, ctx.model_provider(), env=runtime.env, trace_logdir=trace_logdir, run_prefix=ctx.cfg.benchmark,
        trial=trial, seed=ctx.cfg.model.seed, parse_error_limit=ctx.cfg.parse_error_limit,
        tool_error_limit=ctx.cfg.tool_error_limit, run_spec_extra=ctx.run_spec_extra(), experiment_spec=ctx.experiment,
        cancel_event=ctx.cancel_event, executor=ctx.cfg.executor, on_finish=verdict,
        durable_finish=False,  # the result row's flush, right after, covers the trace
        oracle_used=lambda: recipe_ctx.oracle_used, isolation=ctx.isolation(),
    )
    return engine.run(task)


def _evaluated_row(ctx: JobContext, task: Task, trial: int, result: RunResult, verdict: _Verdict) -> BenchmarkRunResult:
    fields: dict[str, Any] = dict(
        prediction=result.final_answer, steps=result.steps, latency_seconds=result.latency_seconds,
        token_usage=result.usage, cost=result.cost, trace_run_dir=result.run_dir, run_spec_ref=result.run_spec_ref,
        error=result.error,
    )
    if result.stop_reason is StopReason.ERROR and not ctx.split:
        from qitos.trace.reader import read_manifest

        report = read_manifest(result.run_dir).summary.failure_report or {}
        fields["error"] = report.get("traceback") or result.error
    if outside_agent(result.stop_reason):  # the machine failed, not the agent: never scored, run again
        return _row(ctx, task, trial, result.stop_reason.value, **{**fields, "success": None})
    if result.stop_reason is StopReason.ERROR and not ctx.split and disk_full(fields["error"]):
        # in one process the error is this side's own; a split run's error text is the agent side's word, and
        # the scoring side names its own full disk itself (sides/evidence.py)
        return _row(ctx, task, trial, StopReason.DISK_FULL.value, **{**fields, "success": None})
    claim = result.outside_claim or {}  # an outside reason the agent side claimed, overruled: kept for readers
    evaluation = verdict.evaluation
    if verdict.error is not None or evaluation is None:
        return _row(ctx, task, trial, StopReason.ERROR.value, metadata={**task.metadata, **claim},
                    **{**fields, "success": None, "error": verdict.error or "the evaluation did not run"})
    if evaluation.prediction is not None:
        fields["prediction"] = evaluation.prediction
    return _row(ctx, task, trial, result.stop_reason.value, success=evaluation.success, score=evaluation.score,
                metadata={**(evaluation.metadata or task.metadata), **claim}, **fields)

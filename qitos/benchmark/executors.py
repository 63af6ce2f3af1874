"""Executors run jobs concurrently: `local` (a thread pool) or `ray` (a Ray cluster).

Threads fit the workload: a job spends its time waiting on model HTTP calls, tools and
subprocesses, and threads share one HTTP connection pool and the in-memory benchmark data.
`benchmarks/harness_overhead.py` measures the choice. Ray workers write traces locally and
ship the finished run directory back, so rows and traces land in the same places either way.
"""

from __future__ import annotations

import concurrent.futures as cf
import io
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from qitos.core.task import Task

from .job import JobContext, run_job
from .results import BenchmarkRunResult

OnResult = Callable[[Task, int, BenchmarkRunResult | None], None]


def run_local(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult) -> None:
    """Run jobs with at most `concurrency` in flight; Ctrl-C cancels in-flight jobs cleanly.

    Each worker reports its own row (`on_result` is thread-safe), so the durable appends of
    rows finishing together share one disk flush instead of queueing behind the main thread.
    """
    pending = iter(jobs)

    def work(task: Task, trial: int) -> None:
        on_result(task, trial, run_job(ctx, task, trial))

    with cf.ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="qitos-job") as pool:
        in_flight: set[cf.Future] = set()

        def fill() -> None:
            while len(in_flight) < concurrency and not ctx.cancel_event.is_set():
                try:
                    task, trial = next(pending)
                except StopIteration:
                    return
                in_flight.add(pool.submit(work, task, trial))

        try:
            fill()
            while in_flight:
                done, _ = cf.wait(in_flight, timeout=0.25, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    in_flight.discard(future)
                    future.result()
                fill()
        except KeyboardInterrupt:
            ctx.cancel_event.set()
            for future in list(in_flight):
                future.result()  # engines see the event and finalize their traces as cancelled
            raise


def _pack_dir(path: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(path, arcname=path.name)
    return buffer.getvalue()


def _ray_job(cfg_json: str, task_json: str, trial: int, digest: str, experiment_json: str,
             selected_tasks: int, run_spec_ref: str | None) -> tuple[dict | None, bytes | None]:
    """Runs on a Ray worker: rebuild the batch context from JSON, run one job, return row + packed trace."""
    import threading

    from qitos.spec.run_spec import ExperimentSpec

    from .config import RunConfig
    from .job import batch_model_provider, resolve_recipe
    from .registry import get_adapter

    cfg = RunConfig.model_validate_json(cfg_json)
    adapter = get_adapter(cfg.benchmark)
    recipe = resolve_recipe(adapter, cfg)
    ctx = JobContext(cfg=cfg, adapter=adapter, recipe=recipe, dataset_digest=digest,
                     experiment=ExperimentSpec.model_validate_json(experiment_json),
                     model_provider=batch_model_provider(cfg, recipe), cancel_event=threading.Event(),
                     selected_tasks=selected_tasks, run_spec_ref=run_spec_ref)
    task = Task.model_validate_json(task_json)
    # gold never travels with the task: this worker's adapter loads it from its own copy of the data
    adapter.load_tasks(cfg.load.model_copy(update={"task_ids": [task.id], "limit": None}))
    with tempfile.TemporaryDirectory(prefix="qitos-ray-") as tmp:
        row = run_job(ctx, task, trial, trace_logdir=Path(tmp))
        if row is None:
            return None, None
        packed = _pack_dir(Path(row.trace_run_dir)) if row.trace_run_dir else None
        return row.model_dump(mode="json"), packed


def run_ray(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult,
            address: str | None) -> None:
    try:
        import ray
    except ImportError:
        from .errors import BenchmarkUsageError

        raise BenchmarkUsageError("--executor ray needs Ray: pip install 'qitos[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
    remote = ray.remote(_ray_job).options(num_cpus=0.01, max_retries=0)
    cfg_json, exp_json = ctx.cfg.model_dump_json(), ctx.experiment.model_dump_json()
    logdir = ctx.cfg.trace_logdir
    pending = list(jobs)
    refs: dict = {}
    try:
        while pending or refs:
            while pending and len(refs) < concurrency:
                task, trial = pending.pop(0)
                refs[remote.remote(cfg_json, task.model_dump_json(), trial, ctx.dataset_digest, exp_json,
                                   ctx.selected_tasks, ctx.run_spec_ref)] = (task, trial)
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in ready:
                task, trial = refs.pop(ref)
                row_data, packed = ray.get(ref)
                row = None
                if row_data is not None:
                    row = BenchmarkRunResult.model_validate(row_data)
                    if packed:
                        logdir.mkdir(parents=True, exist_ok=True)
                        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
                            tar.extractall(logdir, filter="data")
                        row.trace_run_dir = str(logdir / Path(row.trace_run_dir).name)
                on_result(task, trial, row)
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise

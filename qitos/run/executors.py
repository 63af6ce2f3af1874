"""Executors run jobs concurrently: `local` (a thread pool) or `ray` (a Ray cluster).

Threads fit the workload: a job spends its time waiting on model HTTP calls, tools and
subprocesses, and threads share one HTTP connection pool and the in-memory benchmark data.
`benchmarks/harness_overhead.py` measures the choice. The Ray executor lives in the `cluster`
package: its workers write traces on their node and ship the finished run directory back, so rows and
traces land in the same places either way.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import threading
from pathlib import Path
from typing import Callable, Iterable

from qitos.core.task import Task

from qitos.run.job import run_job

from qitos.run.job_context import JobContext
from qitos.results.rows import BenchmarkRunResult

OnResult = Callable[[Task, int, BenchmarkRunResult | None], None]


def run_local(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult) -> None:
    """Run jobs with at most `concurrency` in flight; Ctrl-C cancels in-flight jobs cleanly.

    Each of `concurrency` threads takes its next job itself as soon as its last one is recorded: no
    round trip through a dispatcher thread, which under a busy interpreter lock left a slot idle for
    tens of milliseconds between runs. Each thread reports its own row (`on_result` is thread-safe),
    so the durable appends of rows finishing together share one disk flush.

    When the agents run on the agent side (`ctx.split`), what is loaded by now (modules, schemas, the benchmark's
    data) is frozen for the garbage collector while the jobs run: its collections then walk only what the jobs
    allocate, not the whole program again and again. Not when agent code runs in this process (a validator, an
    unsplit family): frozen objects are hidden from `gc.get_objects()`, which such code may walk.
    """
    pending = iter(jobs)
    take = threading.Lock()  # one thread at a time advances the job iterator (it may block on a queue)
    failed = threading.Event()  # a slot raised: the others finish their runs but take no new ones

    def next_job() -> tuple[Task, int] | None:
        with take:
            if failed.is_set() or ctx.cancel_event.is_set():
                return None
            return next(pending, None)

    def slot() -> None:
        try:
            while (job := next_job()) is not None:
                task, trial = job
                on_result(task, trial, run_job(ctx, task, trial))
        except BaseException:
            failed.set()
            raise

    freeze = ctx.split
    if freeze:
        gc.freeze()
    try:
        _run_slots(ctx, slot, concurrency)
    finally:
        if freeze:
            gc.unfreeze()


def _run_slots(ctx: JobContext, slot: Callable[[], None], concurrency: int) -> None:
    with cf.ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="qitos-job") as pool:
        slots = [pool.submit(slot) for _ in range(max(1, concurrency))]
        try:
            while not all(s.done() for s in slots):
                cf.wait(slots, timeout=0.25)  # a timeout keeps the main thread responsive to Ctrl-C
            for s in slots:
                s.result()  # the first failure (e.g. a row that could not be written) is raised here
        except KeyboardInterrupt:
            ctx.cancel_event.set()
            for s in slots:
                s.result()  # engines see the event and finalize their traces as cancelled
            raise


def connect_ray(address: str | None, log: Path) -> None:
    """See `cluster.connect`: Ray is imported only when `--executor ray` is used; its own output while it connects
    goes to the run's Ray log (`log`), not the terminal."""
    from qitos.run.cluster.connect import connect_ray as connect

    connect(address, log)


def run_ray(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult,
            address: str | None) -> None:
    """Run the jobs on a Ray cluster: see the `cluster` package."""
    from qitos.run.cluster.driver import run_ray as run

    run(ctx, jobs, concurrency, on_result, address)

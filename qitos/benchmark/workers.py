"""`--workers N`: the local executor spread over N forked processes, each running its own thread pool.

One Python process runs Python code on one core at a time (the GIL). When a batch's own work (agent
code, parsing, tracing, the HTTP client) fills that core, more threads only queue for it; worker
processes use the other cores. Workers are forked after planning, so they start in milliseconds with
the batch context (adapter, recipe, model client, data) already loaded. Each worker pulls jobs from a
shared queue, writes its traces straight into the log directory, appends each row to the results file
itself (durable before anyone is told the task finished: the row's disk flush covers its trace) and then
tells the parent, which drives the progress bar exactly as with threads.

Stopping: Ctrl-C reaches every worker (same process group); SIGTERM or SIGHUP to the parent alone (`timeout`,
`docker stop`) is passed on through a shared event. Either way in-flight runs end `cancelled` and a rerun
resumes. If the parent is killed outright, each worker notices within a second (PR_SET_PDEATHSIG, backed by
a watch on its parent's pid), cancels its runs and exits: no orphan keeps calling the model.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import signal
import sys
import threading
import traceback
from typing import Callable, Iterable, Iterator

from qitos.core.stop import is_disk_full
from qitos.core.task import Task
from qitos.trace.durability import FLUSHER

from .executors import OnResult, run_local
from .job import JobContext
from .lifetime import Stopped, die_with_parent, on_stop_signals, raise_stopped, watch_parent
from .results import BenchmarkRunResult

_FINISHED = "finished"


def run_workers(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, workers: int,
                on_result: OnResult, save: Callable[[BenchmarkRunResult], None]) -> None:
    """Run jobs in `workers` processes with `concurrency` in flight overall.

    Each worker calls `save(row)` (the durable append) itself; `on_result` then sees the saved row here."""
    job_list = list(jobs)
    workers = max(1, min(workers, len(job_list)))
    if not job_list:
        return
    mp = multiprocessing.get_context("fork")
    todo, done, cancel = mp.Queue(), mp.Queue(), mp.Event()
    for index in range(len(job_list)):
        todo.put(index)
    for _ in range(workers):
        todo.put(None)
    shares = [concurrency // workers + (1 if i < concurrency % workers else 0) for i in range(workers)]
    parent = os.getpid()
    procs = [mp.Process(target=_worker, args=(ctx, job_list, max(1, share), todo, done, cancel, save, parent),
                        name=f"qitos-worker-{i}", daemon=True) for i, share in enumerate(shares)]
    # Freeze what is loaded (modules, schemas, the benchmark's data) so the workers' garbage collector never
    # walks it again: cheaper collections, and no copy-on-write of pages the collector would have touched.
    gc.freeze()
    try:
        for proc in procs:
            proc.start()
    finally:
        gc.unfreeze()
    # A stop signal only marks the batch cancelled here (the workers see the shared event; Ctrl-C reaches them
    # directly too), so the parent is never interrupted halfway through taking a row it has been sent.
    stopped: list[int] = []
    with on_stop_signals(lambda signum: (stopped.append(signum), cancel.set())):
        _collect(job_list, procs, done, on_result)
    if cancel.is_set():
        raise Stopped(stopped[0]) if stopped and stopped[0] != signal.SIGINT else KeyboardInterrupt


def _collect(job_list: list[tuple[Task, int]], procs: list, done, on_result: OnResult) -> None:
    """Hand each saved row to `on_result` until every worker has said it is finished (or has died)."""
    finished = 0
    while finished < len(procs):
        try:
            item = done.get(timeout=0.25)
        except queue.Empty:
            if all(not p.is_alive() for p in procs) and done.empty():
                break  # a worker died without saying so (e.g. killed): its unfinished jobs stay undone
            continue
        if item == _FINISHED:
            finished += 1
            continue
        index, row_json = item
        task, trial = job_list[index]
        on_result(task, trial, None if row_json is None else BenchmarkRunResult.model_validate_json(row_json))
    for proc in procs:
        proc.join(timeout=30)


def _worker(ctx: JobContext, job_list: list[tuple[Task, int]], concurrency: int, todo, done, cancel,
            save: Callable[[BenchmarkRunResult], None], parent: int) -> None:
    """One worker process: a thread pool fed from the shared queue; saved rows are announced through `done`."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: raise_stopped(signum))
    orphaned = threading.Event()

    def parent_gone() -> None:
        orphaned.set()
        ctx.cancel_event.set()
        os.kill(os.getpid(), signal.SIGTERM)  # interrupts the main thread's wait, as the kernel's signal would

    die_with_parent(signal.SIGTERM)
    watch_parent(parent, parent_gone)  # also covers a parent that died before the prctl above
    ctx.host = None  # each worker process talks to an agent host of its own
    threading.Thread(target=lambda: (cancel.wait(), ctx.cancel_event.set()), daemon=True).start()
    slot: dict[tuple[str, int], int] = {}

    def jobs() -> Iterator[tuple[Task, int]]:
        while not ctx.cancel_event.is_set():
            index = todo.get()
            if index is None:
                return
            task, trial = job_list[index]
            slot[(task.id, trial)] = index
            yield task, trial

    def report(task: Task, trial: int, row: BenchmarkRunResult | None) -> None:
        if row is not None:
            if row.trace_run_dir:  # the row's disk flush then covers the trace too, wherever it lives
                FLUSHER.mark_dirty(row.trace_run_dir)
            save(row)  # durable before the parent hears of it: a parent killed now loses nothing finished
        done.put((slot[(task.id, trial)], None if row is None else row.model_dump_json()))

    code = 0
    try:
        run_local(ctx, jobs(), concurrency, report)
    except KeyboardInterrupt:
        ctx.cancel_event.set()
    except BaseException as exc:  # noqa: BLE001 - say why this worker stopped; its unfinished jobs stay undone
        if is_disk_full(exc):  # the machine's failure: one line, not a traceback (issue 32)
            sys.stderr.write(f"error: worker {os.getpid()} stopped: {getattr(exc, 'strerror', exc)} writing "
                             f"{getattr(exc, 'filename', None) or 'a row or a trace'}; free some space, then rerun "
                             "the same command: finished rows are kept and the rest run again\n")
        else:
            traceback.print_exc()
        code = 1
    finally:
        if orphaned.is_set() or os.getppid() != parent:
            done.cancel_join_thread()  # nobody reads the queue any more: do not wait to hand it over
        else:
            done.put(_FINISHED)
            done.close()
            done.join_thread()  # every row reaches the parent before this process exits
        os._exit(code)  # skip teardown of state inherited from the parent (atexit handlers, its threads' objects)


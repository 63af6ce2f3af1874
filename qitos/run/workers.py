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
import itertools
import multiprocessing
import os
import queue
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Callable, Iterable, Iterator

from qitos.core.stop import StopReason, is_disk_full
from qitos.core.task import Task
from qitos.trace.durability import FLUSHER
from qitos.results.commit import RowCommitter, row_paths

from qitos.run.executors import OnResult, run_local
from qitos.run.job import seal
from qitos.run.job_context import JobContext
from qitos.run.lifetime import Stopped, die_with_parent, on_stop_signals, raise_stopped, watch_parent
from qitos.run.sides.host import AgentHostError
from qitos.results.rows import BenchmarkRunResult
from qitos.core.task_list import JobList

_STARTED, _ROW, _FINISHED = "started", "row", "finished"  # what a worker tells the parent


def run_workers(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, workers: int,
                on_result: OnResult, save: Callable[..., int]) -> list[str]:
    """Run jobs in `workers` processes with `concurrency` in flight overall; returns how each worker that died
    while running jobs ended (its jobs in flight get `worker_died` rows: unscored, a rerun runs them again).

    Each worker calls `save(row, wait=False)` (the append; `ResultsFile.append`) itself and has the row made
    durable by its committer; `on_result` then sees the saved row here."""
    job_list = jobs if isinstance(jobs, JobList) else JobList.of(list(jobs))
    workers = max(1, min(workers, len(job_list)))
    if not job_list:
        return []
    mp = multiprocessing.get_context("fork")
    todo, done, cancel = mp.Queue(maxsize=2 * concurrency + workers), mp.Queue(), mp.Event()
    fed = _feed(todo, job_list, workers)
    shares = [concurrency // workers + (1 if i < concurrency % workers else 0) for i in range(workers)]
    parent = os.getpid()
    # agent hosts started already (planning's, and those spawned for the other workers): worker i adopts the i-th
    hosts = [h for h in (ctx.host, *ctx.spare_hosts) if h is not None][:workers]
    for host in list(hosts):
        try:
            host.hand_over()
        except AgentHostError:  # a spare that did not start: its worker starts one itself (and says why if not)
            host.close()
            hosts.remove(host)
    procs = [mp.Process(target=_worker, args=(ctx, max(1, share), todo, done, cancel, save, parent, i, hosts),
                        name=f"qitos-worker-{i}", daemon=True)
             for i, share in enumerate(shares)]
    # Freeze what is loaded (modules, schemas, the benchmark's data) so the workers' garbage collector never
    # walks it again: cheaper collections, and no copy-on-write of pages the collector would have touched.
    gc.freeze()
    try:
        for proc in procs:
            proc.start()
    finally:
        gc.unfreeze()
        for host in hosts:  # each is its worker's now: it ends when that worker does
            host.release()
    # A stop signal only marks the batch cancelled here (the workers see the shared event; Ctrl-C reaches them
    # directly too), so the parent is never interrupted halfway through taking a row it has been sent.
    stopped: list[int] = []
    with on_stop_signals(lambda signum: (stopped.append(signum), cancel.set())):
        collector = _Collector(ctx, job_list, procs, on_result, save)
        try:
            fed.start()
            collector.run(done, cancel)
        finally:
            fed.stop.set()
            todo.cancel_join_thread()  # what no worker took any more is dropped, not waited on at exit
    if cancel.is_set():
        raise Stopped(stopped[0]) if stopped and stopped[0] != signal.SIGINT else KeyboardInterrupt
    return collector.died


def _feed(todo, job_list: JobList, workers: int) -> threading.Thread:
    """A thread that hands the jobs to the workers as they take them, each task as JSON: a worker parses its own
    copy and never touches this process's task objects (touching them would copy their pages into each worker:
    memory that grew with the number of tasks). Then one `None` per worker: no more jobs."""
    stop = threading.Event()

    def run() -> None:
        items = ((index, job_list.task_json(index), job_list.trial(index)) for index in range(len(job_list)))
        for item in itertools.chain(items, [None] * workers):
            while not stop.is_set():
                try:
                    todo.put(item, timeout=0.25)
                    break
                except queue.Full:
                    continue
            else:
                return

    thread = threading.Thread(target=run, name="qitos-worker-feed", daemon=True)
    thread.stop = stop  # type: ignore[attr-defined]
    return thread


class _Collector:
    """The parent's side: hand each saved row to `on_result` until every worker has said it is finished or has
    died; a dead worker's jobs in flight end `worker_died` (its queued jobs go to the others)."""

    def __init__(self, ctx: JobContext, job_list: JobList, procs: list, on_result: OnResult,
                 save: Callable[..., int]) -> None:
        self.ctx, self.job_list, self.procs, self.on_result, self.save = ctx, job_list, procs, on_result, save
        self.running: dict[int, set[int]] = {n: set() for n in range(len(procs))}  # worker -> job indices
        self.ended: set[int] = set()  # workers that said they are finished, or died
        self.died: list[str] = []

    def run(self, done, cancel) -> None:
        while len(self.ended) < len(self.procs):
            try:
                self.take(done.get(timeout=0.25))
            except queue.Empty:
                dead = [n for n, p in enumerate(self.procs) if n not in self.ended and not p.is_alive()]
                if dead:
                    self.drain(done)  # what a worker sent before it died is in the pipe: take it first
                for number in dead:
                    if number not in self.ended:
                        self.bury(number, cancel.is_set())
        for proc in self.procs:
            proc.join(timeout=30)

    def drain(self, done) -> None:
        while True:
            try:
                self.take(done.get(timeout=0.05))
            except queue.Empty:
                return

    def take(self, item) -> None:
        kind, number, index, row_json = item
        if kind == _FINISHED:
            self.ended.add(number)
        elif kind == _STARTED:
            self.running[number].add(index)
        else:
            self.running[number].discard(index)
            task, trial = self.job_list[index]
            self.on_result(task, trial, None if row_json is None else BenchmarkRunResult.model_validate_json(row_json))

    def bury(self, number: int, cancelled: bool) -> None:
        """A worker that died without saying it was finished: rows for its jobs in flight (a row it saved before
        dying is taken from the results file, not written twice)."""
        from qitos.run.job import _row

        self.ended.add(number)
        proc, lost = self.procs[number], sorted(self.running.pop(number, set()))
        code = proc.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        if cancelled and not lost:
            return
        self.died.append(f"worker process {proc.pid} ({how}) with {len(lost)} task(s) in flight")
        if cancelled:
            return  # a stopped batch: its jobs in flight simply stay undone (a rerun runs them)
        saved = _saved_rows(self.ctx)
        written = [saved[key] for key in map(self.job_list.key, lost) if key in saved]
        if written:  # rows it wrote but had not committed yet: made durable with their traces, and sealed below,
            results = _results_path(self.ctx)  # as its committer would have
            FLUSHER.sync_paths({path for row in written for path in row_paths(results, row.trace_run_dir)})
        for index in lost:
            task, trial = self.job_list[index]
            row = saved.get((task.id, trial))
            if row is None:
                row = _row(self.ctx, task, trial, StopReason.WORKER_DIED.value, success=None,
                           error=f"the worker process running the task ({proc.pid}) died ({how}); a rerun runs "
                                 "it again")
                self.save(row)
            else:
                seal(row)
            self.on_result(task, trial, row)


def _results_path(ctx: JobContext) -> Path:
    return ctx.cfg.output or ctx.cfg.default_output()


def _saved_rows(ctx: JobContext) -> dict[tuple[str, int], BenchmarkRunResult]:
    from qitos.results.rows import read_results

    path = _results_path(ctx)
    return {(r.task_id, r.trial): r for r in read_results(path)} if path.exists() else {}


def _worker(ctx: JobContext, concurrency: int, todo, done, cancel, save: Callable[..., int],
            parent: int, number: int, hosts: list) -> None:
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
    for other, host in enumerate(hosts):  # each worker process talks to an agent host of its own
        if other != number:
            host.release()
    ctx.host = hosts[number].adopt() if number < len(hosts) else None
    ctx.spare_hosts = []
    threading.Thread(target=lambda: (cancel.wait(), ctx.cancel_event.set()), daemon=True).start()
    slot: dict[tuple[str, int], int] = {}

    def jobs() -> Iterator[tuple[Task, int]]:
        while not ctx.cancel_event.is_set():
            item = todo.get()
            if item is None:
                return
            index, task_json, trial = item
            task = Task.model_validate_json(task_json)
            slot[(task.id, trial)] = index
            done.put((_STARTED, number, index, None))
            yield task, trial

    def committed(task: Task, trial: int, row: BenchmarkRunResult) -> None:
        seal(row)  # durable: its trace may say it is complete, and the parent hears of it (a parent killed now
        done.put((_ROW, number, slot.pop((task.id, trial)), row.model_dump_json()))  # loses nothing finished)

    committer = RowCommitter(committed)  # the disk flush is waited for there, not by the job's slot (commit.py)
    results = _results_path(ctx)

    def report(task: Task, trial: int, row: BenchmarkRunResult | None) -> None:
        if row is None:
            done.put((_ROW, number, slot.pop((task.id, trial)), None))
            return
        save(row, wait=False)  # written now (a killed worker loses nothing); durable with its trace when committed
        committer.submit(row_paths(results, row.trace_run_dir), task, trial, row)

    code = 0
    try:
        try:
            run_local(ctx, jobs(), concurrency, report)
        finally:
            committer.drain()  # every finished row durable, sealed and announced before this worker says it is done
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
            done.put((_FINISHED, number, None, None))
            done.close()
            done.join_thread()  # every row reaches the parent before this process exits
        os._exit(code)  # skip teardown of state inherited from the parent (atexit handlers, its threads' objects)


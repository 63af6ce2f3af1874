"""Executors run jobs concurrently: `local` (a thread pool) or `ray` (a Ray cluster).

Threads fit the workload: a job spends its time waiting on model HTTP calls, tools and
subprocesses, and threads share one HTTP connection pool and the in-memory benchmark data.
`benchmarks/harness_overhead.py` measures the choice. Ray workers write traces locally and
ship the finished run directory back, so rows and traces land in the same places either way.
"""

from __future__ import annotations

import concurrent.futures as cf
import io
import os
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterable

from qitos.core.task import Task

from .job import JobContext, run_job
from .results import BenchmarkRunResult

OnResult = Callable[[Task, int, BenchmarkRunResult | None], None]


def run_local(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult) -> None:
    """Run jobs with at most `concurrency` in flight; Ctrl-C cancels in-flight jobs cleanly.

    Each of `concurrency` threads takes its next job itself as soon as its last one is recorded: no
    round trip through a dispatcher thread, which under a busy interpreter lock left a slot idle for
    tens of milliseconds between runs. Each thread reports its own row (`on_result` is thread-safe),
    so the durable appends of rows finishing together share one disk flush.
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


def _pack_dir(path: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(path, arcname=path.name)
    return buffer.getvalue()


def _ray_job(cfg_json: str, task_json: str, trial: int, digest: str, experiment_json: str,
             selected_tasks: int, run_spec_ref: str | None, model_id: str | None) -> tuple[dict | None, bytes | None]:
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
                     selected_tasks=selected_tasks, run_spec_ref=run_spec_ref, model_id=model_id)
    task = Task.model_validate_json(task_json)
    # gold never travels with the task: this worker's adapter loads it from its own copy of the data
    adapter.load_tasks(cfg.load.model_copy(update={"task_ids": [task.id], "limit": None}))
    try:
        with tempfile.TemporaryDirectory(prefix="qitos-ray-") as tmp:
            row = run_job(ctx, task, trial, trace_logdir=Path(tmp))
            if row is None:
                return None, None
            packed = _pack_dir(Path(row.trace_run_dir)) if row.trace_run_dir else None
            return row.model_dump(mode="json"), packed
    finally:
        if ctx.host is not None:  # this node's agent host for the job (the agent side runs here, confined)
            ctx.host.close()


RAY_FIX = ("start a head with `ray start --head --port 6379` and pass the address it prints "
           "(e.g. --ray-address 127.0.0.1:6379), or leave out --ray-address to start a local Ray")
RAY_AUTH_FIX = ("the cluster uses Ray token authentication: export RAY_AUTH_TOKEN=<the cluster's token> "
                "(or put it in ~/.ray/auth_token) and RAY_AUTH_MODE=token")


def _probe(address: str) -> str | None:
    """Why nothing answers at `host:port` (None when something does): Ray itself retries for minutes."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return None  # "auto", ray:// client addresses: left to Ray
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=3).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _use_local_token() -> None:
    """Send this machine's Ray token when one exists, as Ray does for clusters it finds itself.

    Ray (2.5x and later) starts `ray start --head` clusters with token authentication once a token exists
    (~/.ray/auth_token), but a driver given an explicit address connects without it and fails with
    "Failed to connect to Ray cluster". A driver sending a token still connects to a cluster without auth.
    RAY_AUTH_MODE set by the user wins.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # an older Ray: no token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _auth_refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if "Authentication" in type(seen).__name__ or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def connect_ray(address: str | None) -> None:
    """Connect to (or start) Ray before anything is written; a failure is one line naming the fix."""
    from .errors import BenchmarkUsageError

    try:
        import ray
    except ImportError:
        raise BenchmarkUsageError("--executor ray needs Ray: pip install 'qitos[ray]'") from None
    if ray.is_initialized():
        return
    where = f"--ray-address {address}" if address else "--executor ray (local Ray)"
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")  # failed jobs are reported here, in one line
    if address:
        problem = _probe(address)
        if problem:
            raise BenchmarkUsageError(f"{where}: cannot connect to Ray (nothing answers there: {problem}); {RAY_FIX}")
        _use_local_token()
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError, ...
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        fix = RAY_AUTH_FIX if _auth_refused(exc) else RAY_FIX
        raise BenchmarkUsageError(f"{where}: cannot connect to Ray ({reason}); {fix}") from None


def _worker_failed(exc: BaseException):
    """One line for a job a Ray worker could not even start (e.g. it cannot import your --runner module)."""
    from .errors import BenchmarkUsageError

    cause = getattr(exc, "cause", None) or exc
    reason = " ".join(str(cause).split())[:300] or type(cause).__name__
    return BenchmarkUsageError(
        f"a Ray worker could not run a job ({type(cause).__name__}: {reason}); the cluster's workers need qitos, "
        "your --runner module and the benchmark data at the same paths as here (start the head where they "
        "are installed, e.g. with PYTHONPATH set, or use a runtime_env)")


def run_ray(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult,
            address: str | None) -> None:
    import ray

    connect_ray(address)
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
                                   ctx.selected_tasks, ctx.run_spec_ref, ctx.model_id)] = (task, trial)
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in ready:
                task, trial = refs.pop(ref)
                try:
                    row_data, packed = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - the job itself never raises: the worker could not run it
                    for other in refs:
                        ray.cancel(other, force=True)
                    raise _worker_failed(exc) from None
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

"""The driver's side of `--executor ray`: submit jobs, take their rows back, append them, survive node deaths.

Rows are appended by the driver (`on_result`: durable before the task is reported finished), so a rerun never
repeats a task whose row was written. A job whose node dies (or whose worker process is killed: the node ran
out of memory, ...) is submitted once more; the dead node has left the cluster, so Ray places the retry on
another node, and the row records both (`placement.attempt`, `placement.retried_after`). An agent's own
failure is a row like any other and is not retried. Ctrl-C, SIGTERM and SIGHUP cancel every job in flight;
when the driver dies, Ray ends the jobs it owns, and a local Ray started by qit goes with it.
"""

from __future__ import annotations

import io
import tarfile
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from qitos.core.task import Task

from ..errors import BenchmarkUsageError
from ..results import BenchmarkRunResult
from .placement import job_needs, ray_options
from .shipping import build_shipment
from .worker import run_shipped_job

if TYPE_CHECKING:
    from ..job import JobContext

OnResult = Callable[[Task, int, BenchmarkRunResult | None], None]
RETRIES = 1  # a job whose node died runs at most twice


def _one_line(exc: BaseException, limit: int = 300) -> str:
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {' '.join(str(cause).split())[:limit]}"


def node_lost(exc: BaseException) -> bool:
    """Did the job fail because its node or worker process went away (not because of the job itself)?"""
    from ray import exceptions as rx

    kinds = tuple(getattr(rx, name) for name in ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError",
                                                 "ObjectLostError", "OutOfMemoryError")
                  if hasattr(rx, name))
    return isinstance(exc, kinds) and not isinstance(exc, rx.RayTaskError)


def _worker_failed(exc: BaseException) -> BenchmarkUsageError:
    """One line for a job a Ray worker could not even start (e.g. Ray cannot import qitos there)."""
    return BenchmarkUsageError(
        f"a Ray worker could not run a job ({_one_line(exc)}); every node of the cluster needs qitos installed "
        "(the same version as here) and `ray start` run where it is importable")


def _received(row_data: dict, packed: bytes | None, logdir: Path) -> BenchmarkRunResult:
    row = BenchmarkRunResult.model_validate(row_data)
    if packed:
        logdir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
            tar.extractall(logdir, filter="data")
        row.trace_run_dir = str(logdir / Path(row.trace_run_dir or "").name)
    return row


def _lost_row(ctx: JobContext, task: Task, trial: int, reasons: list[str]) -> BenchmarkRunResult:
    from ..job import _row

    row = _row(ctx, task, trial, "error", error=(f"the job was lost {len(reasons)} times with its node or worker "
                                                 f"process ({'; then '.join(reasons)}); --retry-errors runs it again"))
    row.placement = {"executor": "ray", "attempt": len(reasons), "retried_after": reasons[0]}
    return row


def run_ray(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult,
            address: str | None) -> None:
    import ray

    from ..lifetime import Stopped, on_stop_signals
    from .connect import connect_ray

    connect_ray(address)
    shipment = ray.put(build_shipment(ctx))
    remote = ray.remote(run_shipped_job)
    logdir = Path(ctx.cfg.trace_logdir)
    pending: deque[tuple[Task, int, list[str]]] = deque((task, trial, []) for task, trial in jobs)
    refs: dict = {}
    # A stop signal is only noted here and acted on between waits: raised inside Ray's calls, it would come
    # back as a plain KeyboardInterrupt (the signal lost) or not at all.
    received: list[int] = []
    with on_stop_signals(received.append):
        _loop(ctx, pending, refs, concurrency, on_result, remote, shipment, logdir, received, Stopped)


def _loop(ctx, pending, refs, concurrency, on_result, remote, shipment, logdir, received, stopped) -> None:
    import ray

    try:
        while pending or refs:
            if received:
                raise stopped(received[0])
            while pending and len(refs) < concurrency:
                task, trial, lost = pending.popleft()
                options = ray_options(job_needs(ctx.cfg, ctx.adapter, task))
                ref = remote.options(**options).remote(shipment, task.model_dump_json(), trial, len(lost) + 1,
                                                       lost[0] if lost else None)
                refs[ref] = (task, trial, lost)
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            if ready:
                ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
            for ref in ready:
                task, trial, lost = refs.pop(ref)
                try:
                    row_data, packed = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - the job itself never raises: its node or worker failed
                    if not node_lost(exc):
                        for other in refs:
                            ray.cancel(other, force=True)
                        raise _worker_failed(exc) from None
                    lost = [*lost, _one_line(exc, 200)]
                    if len(lost) <= RETRIES:
                        pending.appendleft((task, trial, lost))
                    else:
                        on_result(task, trial, _lost_row(ctx, task, trial, lost))
                    continue
                on_result(task, trial, _received(row_data, packed, logdir) if row_data is not None else None)
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise

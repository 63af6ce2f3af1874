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
import os
import tarfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from qitos.core.task import Task

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.results.rows import BenchmarkRunResult
from qitos.run.cluster.placement import job_needs, ray_options
from qitos.run.cluster.shipping import build_shipment
from qitos.run.cluster.worker import run_shipped_job

if TYPE_CHECKING:
    from qitos.run.job_context import JobContext

OnResult = Callable[[Task, int, BenchmarkRunResult | None], None]
RETRIES = 1  # a job whose node died runs at most twice
CHECK_SECONDS = 2.0  # how often the driver checks that every job still has a live node that can run it
# how long a job may have no such node (one may be restarting) before it ends (QITOS_RAY_PLACEMENT_GRACE: seconds)
PLACEMENT_GRACE_SECONDS = float(os.environ.get("QITOS_RAY_PLACEMENT_GRACE", "30"))


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


def _unplaceable_row(ctx: JobContext, task: Task, trial: int, needs: dict[str, float], waited: float,
                     lost: list[str]) -> BenchmarkRunResult:
    from qitos.run.job import _row

    what = ", ".join(f"{k}={v:g}" for k, v in sorted(needs.items()))
    row = _row(ctx, task, trial, "node_lost", error=(
        f"no live node of the Ray cluster can run the job any more (it needs {what}; none has had it for "
        f"{waited:.0f} s{', after: ' + '; '.join(lost) if lost else ''}); start a node with it, then rerun"))
    row.placement = {"executor": "ray", "attempt": len(lost) + 1, "retried_after": lost[0] if lost else None}
    return row


def _lost_row(ctx: JobContext, task: Task, trial: int, reasons: list[str]) -> BenchmarkRunResult:
    from qitos.run.job import _row

    row = _row(ctx, task, trial, "node_lost", error=(f"the job was lost {len(reasons)} times with its node or worker "
                                                     f"process ({'; then '.join(reasons)}); a rerun runs it again"))
    row.placement = {"executor": "ray", "attempt": len(reasons), "retried_after": reasons[0]}
    return row


@dataclass
class _Batch:
    """The driver's state of one batch on Ray: jobs waiting, jobs in flight, stop signals received."""

    ctx: JobContext
    pending: deque  # (task, trial, reasons it was lost so far)
    on_result: OnResult
    concurrency: int
    remote: Any
    shipment: Any
    refs: dict = field(default_factory=dict)
    received: list[int] = field(default_factory=list)
    checked_at: float = 0.0
    stranded_since: float | None = None  # since when some job has had no live node that can run it

    def submit(self) -> None:
        while self.pending and len(self.refs) < self.concurrency:
            task, trial, lost = self.pending.popleft()
            options = ray_options(job_needs(self.ctx.cfg, self.ctx.adapter, task))
            ref = self.remote.options(**options).remote(self.shipment, task.model_dump_json(), trial, len(lost) + 1,
                                                        lost[0] if lost else None)
            self.refs[ref] = (task, trial, lost)

    def take(self, ref: Any) -> None:
        """One finished job: its row appended (via on_result), or, when its node was lost, a second try."""
        import ray

        task, trial, lost = self.refs.pop(ref)
        try:
            row_data, packed = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the job itself never raises: its node or worker failed
            if not node_lost(exc):
                self.cancel()
                raise _worker_failed(exc) from None
            lost = [*lost, _one_line(exc, 200)]
            if len(lost) <= RETRIES:
                self.pending.appendleft((task, trial, lost))
            else:
                self.on_result(task, trial, _lost_row(self.ctx, task, trial, lost))
            return
        row = _received(row_data, packed, Path(self.ctx.cfg.trace_logdir)) if row_data is not None else None
        self.on_result(task, trial, row)

    def end_stranded(self) -> None:
        """Jobs no live node can run any more (the only node with what they need has died) end `node_lost`
        once that has lasted PLACEMENT_GRACE_SECONDS: the run never waits forever."""
        import time

        import ray

        from qitos.run.cluster.placement import _fits, alive_nodes

        now = time.monotonic()
        if now - self.checked_at < CHECK_SECONDS:
            return
        self.checked_at = now
        nodes = alive_nodes()
        cfg, adapter = self.ctx.cfg, self.ctx.adapter
        stranded = [(ref, task, trial, lost, job_needs(cfg, adapter, task))
                    for ref, (task, trial, lost) in [*self.refs.items(), *((None, job) for job in self.pending)]]
        stranded = [s for s in stranded if not any(_fits(n, s[4]) for n in nodes)]
        if not stranded:
            self.stranded_since = None
            return
        self.stranded_since = self.stranded_since or now
        waited = now - self.stranded_since
        if waited < PLACEMENT_GRACE_SECONDS:
            return
        for ref, task, trial, lost, needs in stranded:
            if ref is not None:
                self.refs.pop(ref, None)
                ray.cancel(ref, force=True)
            else:
                self.pending.remove((task, trial, lost))
            self.on_result(task, trial, _unplaceable_row(self.ctx, task, trial, needs, waited, lost))
        self.stranded_since = None

    def cancel(self) -> None:
        import ray

        for ref in self.refs:
            ray.cancel(ref, force=True)

    def run(self) -> None:
        import ray

        from qitos.run.lifetime import Stopped

        try:
            while self.pending or self.refs:
                if self.received:
                    raise Stopped(self.received[0])
                self.submit()
                ready, _ = ray.wait(list(self.refs), num_returns=1, timeout=0.5)
                if ready:
                    ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=0)
                for ref in ready:
                    self.take(ref)
                self.end_stranded()
        except KeyboardInterrupt:
            self.cancel()
            raise


def run_ray(ctx: JobContext, jobs: Iterable[tuple[Task, int]], concurrency: int, on_result: OnResult,
            address: str | None) -> None:
    import ray

    from qitos.run.cluster.connect import connect_ray, native_stderr_to, ray_log
    from qitos.run.lifetime import on_stop_signals

    log = ray_log(ctx.cfg.output or ctx.cfg.default_output())
    # Ray's own output goes to the run's Ray log, not the terminal: from the connect on (its start-up messages;
    # planning connected already, into the same log) through the run (its state dumps when a raylet dies)
    with native_stderr_to(log):
        connect_ray(address)
        batch = _Batch(ctx=ctx, pending=deque((task, trial, []) for task, trial in jobs), on_result=on_result,
                       concurrency=concurrency, remote=ray.remote(run_shipped_job),
                       shipment=ray.put(build_shipment(ctx)))
        # A stop signal is only noted here and acted on between waits: raised inside Ray's calls, it would come
        # back as a plain KeyboardInterrupt (the signal lost) or not at all.
        with on_stop_signals(batch.received.append):
            batch.run()

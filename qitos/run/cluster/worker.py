"""One job on a Ray node: run it with the node's own data and providers, return its row and packed trace.

The job writes its trace in a scratch folder of the node and sends it back packed, so rows and traces land
in the driver's `--output` and `--trace-logdir` exactly as with the local executor. The row and the trace's
manifest record where the job ran (`placement`: Ray node id, host, provider instance, attempt).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

from qitos.core.task import Task

from qitos.run.cluster.nodes import job_scratch, node_batch, node_identity, provider_instance
from qitos.run.cluster.shipping import Shipment


def _pack_dir(path: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(path, arcname=path.name)
    return buffer.getvalue()


def _stamp_manifest(run_dir: Path, placement: dict[str, Any]) -> None:
    """Add where the run ran to its manifest (atomically: write a temporary file, then rename)."""
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        return
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["placement"] = placement
    tmp = run_dir / f".manifest.json.{os.getpid()}.placement"
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, manifest)


def _problem_row(shipment: Shipment, task: Task, trial: int, reason: str, placement: dict[str, Any]) -> dict:
    from qitos.run.config import RunConfig
    from qitos.results.rows import BenchmarkRunResult

    cfg = RunConfig.model_validate_json(shipment.cfg_json)
    return BenchmarkRunResult(
        task_id=task.id, benchmark=cfg.benchmark, split=cfg.load.split, subset=cfg.load.subset, trial=trial,
        model=shipment.row_model, recipe=shipment.recipe_name, selected_tasks=shipment.selected_tasks,
        trials_requested=cfg.trials, stop_reason="setup_failed", error=reason, run_spec_ref=shipment.run_spec_ref,
        metadata=dict(task.metadata), placement=placement).model_dump(mode="json")


def run_shipped_job(shipment: Shipment, task_json: str, trial: int, attempt: int = 1,
                    retried_after: str | None = None) -> tuple[dict | None, bytes | None]:
    """The Ray task: (row as JSON, packed trace) or (None, None) for a run cancelled before it finished."""
    from qitos.run.job import run_job

    placement = {**node_identity(), "attempt": attempt, "retried_after": retried_after}
    driver_task = Task.model_validate_json(task_json)
    batch = node_batch(shipment)
    placement["data_dir"] = batch.data_dir
    if batch.problem is not None:
        return _problem_row(shipment, driver_task, trial, batch.problem, placement), None
    task = batch.tasks.get(driver_task.id)
    if task is None:
        reason = (f"node {placement['host']}: task '{driver_task.id}' is not in its copy of the data "
                  f"({batch.data_dir}); put the driver's data on that node")
        return _problem_row(shipment, driver_task, trial, reason, placement), None
    ctx = batch.ctx
    assert ctx is not None
    try:
        with job_scratch(batch.scratch) as tmp:
            row = run_job(ctx, task, trial, trace_logdir=Path(tmp))
            if row is None:
                return None, None
            placement["provider_instance"] = provider_instance(row.metadata or {})
            row.placement = placement
            packed = None
            if row.trace_run_dir:
                _stamp_manifest(Path(row.trace_run_dir), placement)
                packed = _pack_dir(Path(row.trace_run_dir))
            return row.model_dump(mode="json"), packed
    finally:
        if ctx.host is not None:  # this node's agent host for the job (the agent side runs here, confined)
            ctx.host.close()
            ctx.host = None

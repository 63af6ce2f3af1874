"""On a Ray node: where a job runs, and the node's own copy of the batch's benchmark data, checked once.

Each node resolves its own data dir (QITOS_DATA_DIR in the environment of its `ray start`, else
~/.cache/qitos/data; or the driver's explicit `--data-dir`, the same path everywhere), loads the benchmark
from it and compares the dataset digest with the driver's. A node whose copy is missing or different runs
nothing: each job placed on it ends `setup_failed` with the reason, never a silently different number.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qitos.core.task import Task

from qitos.run.job_context import JobContext
from qitos.run.cluster.shipping import Shipment


def node_identity() -> dict[str, Any]:
    """This node: Ray's node id, the host name and the node's address."""
    import ray

    ip = None
    try:
        ip = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - the address is informative only
        pass
    return {"executor": "ray", "ray_node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
            "node_ip": ip}


def provider_instance(metadata: dict[str, Any]) -> str | None:
    """The VM or container that served the task, as its row's evaluation recorded it (OSWorld's `vm`, CyBench's
    service network), or None (no provider)."""
    vm = metadata.get("vm")
    if vm:
        return str(vm)
    services = metadata.get("services")
    if isinstance(services, dict) and services.get("network"):
        return f"docker network {services['network']}"
    return None


@dataclass
class NodeJobContext(JobContext):
    """A JobContext whose RunSpec parts (agent code identity, closure, metadata) are the driver's: the runner's
    shipped copy lives at another path here, and rows must keep the driver's configuration."""

    driver_extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def run_spec_extra(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.driver_extra))


@dataclass
class NodeBatch:
    """The batch as this node sees it: a context to run jobs, its tasks, or why it can run none."""

    problem: str | None
    ctx: NodeJobContext | None = None
    tasks: dict[str, Task] = dataclasses.field(default_factory=dict)
    scratch: Path | None = None
    data_dir: str | None = None


_BATCHES: dict[str, NodeBatch] = {}
_LOCK = threading.Lock()


def shipment_key(shipment: Shipment) -> str:
    parts = [shipment.cfg_json, shipment.dataset_digest, shipment.root.sha256 if shipment.root else "",
             shipment.runner.sha256 if shipment.runner else "", shipment.data_dir or ""]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def node_batch(shipment: Shipment) -> NodeBatch:
    """This worker process's view of the batch, built on its first job and kept for the next ones."""
    key = shipment_key(shipment)
    with _LOCK:
        if key not in _BATCHES:
            _BATCHES[key] = _build(shipment)
        return _BATCHES[key]


def node_scratch() -> Path:
    """The node's one scratch folder (`<tmp>/qitos-node`): each job writes its trace in a folder of its own
    there (`job_scratch`), removed when the job ends; the folders of jobs whose process was killed are removed
    here, by the next batch set up on the node. Nothing else is ever written in it."""
    import shutil

    base = Path(tempfile.gettempdir()) / "qitos-node"
    base.mkdir(exist_ok=True)
    for old in base.glob("job-*-*"):
        pid = old.name.split("-")[1]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    return base


def job_scratch(scratch: Path | None) -> tempfile.TemporaryDirectory:
    """One job's folder under the node's scratch, named after this process (see `node_scratch`)."""
    return tempfile.TemporaryDirectory(prefix=f"job-{os.getpid()}-", dir=scratch)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400] or type(exc).__name__


def _build(shipment: Shipment) -> NodeBatch:
    import threading as _threading

    from qitos.spec.run_spec import ExperimentSpec

    from qitos.benchmark.base import default_data_dir
    from qitos.run.config import RunConfig
    from qitos.run.job_context import batch_model_provider, resolve_recipe
    from qitos.benchmark.registry import get_adapter

    cfg = RunConfig.model_validate_json(shipment.cfg_json)
    host = socket.gethostname()
    data_dir = Path(shipment.data_dir) if shipment.data_dir else default_data_dir()
    cfg.load.data_dir = data_dir
    scratch = node_scratch()
    try:
        if shipment.root is not None:
            cfg.load.root = shipment.root.unpack()
        elif shipment.root_path:
            cfg.load.root = Path(shipment.root_path)
        if shipment.runner is not None:
            where = str(shipment.runner.unpack())
            if where not in sys.path:
                sys.path.insert(0, where)
    except Exception as exc:  # noqa: BLE001 - e.g. a shipped archive that arrived damaged, a full disk
        return NodeBatch(problem=f"node {host} cannot unpack the shipped inputs: {_one_line(exc)}", scratch=scratch)
    cfg.output = scratch / "results.jsonl"  # never written here: rows go back to the driver
    cfg.trace_logdir = scratch
    where = f"node {host}"
    try:
        adapter = get_adapter(cfg.benchmark)
        recipe = resolve_recipe(adapter, cfg)
    except Exception as exc:  # noqa: BLE001 - e.g. the runner cannot be imported on this node
        return NodeBatch(problem=f"{where} cannot set up the batch: {_one_line(exc)}", scratch=scratch)
    try:
        whole = adapter.load_tasks(cfg.load.model_copy(update={"limit": None, "task_ids": None}))
    except Exception as exc:  # noqa: BLE001 - a missing or broken copy of the data is this node's problem
        return NodeBatch(problem=(f"{where} cannot load {cfg.benchmark} from its data dir {data_dir} "
                                  f"({_one_line(exc)}); put the same data there (`qit data fetch {cfg.benchmark}` "
                                  "on that node, or QITOS_DATA_DIR in the environment of its `ray start`)"),
                         scratch=scratch, data_dir=str(data_dir))
    if shipment.root is None:  # data this node resolved itself: it must be the driver's
        digest = adapter.dataset_digest(cfg.load, whole)
        if digest != shipment.dataset_digest:
            return NodeBatch(problem=(f"{where}: its copy of {cfg.benchmark} in {cfg.load.root or data_dir} has "
                                      f"dataset digest {digest}, the driver's is {shipment.dataset_digest}; put the "
                                      f"driver's data on that node (`qit data fetch {cfg.benchmark}`)"),
                             scratch=scratch, data_dir=str(data_dir))
    ctx = NodeJobContext(cfg=cfg, adapter=adapter, recipe=recipe, dataset_digest=shipment.dataset_digest,
                         experiment=ExperimentSpec.model_validate_json(shipment.experiment_json),
                         model_provider=batch_model_provider(cfg, recipe), cancel_event=_threading.Event(),
                         selected_tasks=shipment.selected_tasks, run_spec_ref=shipment.run_spec_ref,
                         model_id=shipment.model_id, driver_extra=shipment.run_spec_extra)
    return NodeBatch(problem=None, ctx=ctx, tasks={t.id: t for t in whole}, scratch=scratch, data_dir=str(data_dir))

"""What a job asks Ray for, and the check before the run that some node of the cluster can give it.

Each job asks for a CPU share (`CPU`, default 0.01: jobs wait on models and tools, so `--concurrency` and not
the cores bounds them), the batch's `--ray-resources`, and its task's own needs, declared by the adapter
(`BenchmarkAdapter.cluster_resources`): `osworld_vm` for an OSWorld VM slot, `docker` for a Docker engine,
`kvm`. Nodes advertise them with `ray start --resources '{"osworld_vm": 4, "docker": 1}'`, and Ray places each
job on a node that has what it asks for, spreading jobs over the nodes that do.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

from qitos.benchmark.errors import BenchmarkUsageError

if TYPE_CHECKING:
    from qitos.core.task import Task

    from qitos.benchmark.base import BenchmarkAdapter
    from qitos.run.config import RunConfig

CPU_SHARE = 0.01
FLAG = "--ray-resources"
EXAMPLE = "--ray-resources '{\"osworld_vm\": 1}' or --ray-resources osworld_vm=1,docker=1"


def parse_resources(text: str | None) -> dict[str, float]:
    """`--ray-resources`: a JSON object or NAME=AMOUNT pairs separated by commas; amounts are positive numbers."""
    if not text or not text.strip():
        return {}
    text = text.strip()
    if text.startswith("{"):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BenchmarkUsageError(f"{FLAG} '{text}': not valid JSON ({exc.msg}); e.g. {EXAMPLE}") from None
        if not isinstance(raw, dict):
            raise BenchmarkUsageError(f"{FLAG} '{text}': give an object of resource amounts; e.g. {EXAMPLE}")
        pairs = list(raw.items())
    else:
        pairs = []
        for part in (p.strip() for p in text.split(",")):
            name, sep, amount = part.partition("=")
            if not part or not sep or not name.strip():
                raise BenchmarkUsageError(f"{FLAG} '{text}': '{part}' must look like NAME=AMOUNT; e.g. {EXAMPLE}")
            pairs.append((name.strip(), amount.strip()))
    out: dict[str, float] = {}
    for name, amount in pairs:
        try:
            value = float(amount)
        except (TypeError, ValueError):
            value = float("nan")
        if isinstance(amount, bool) or not value > 0 or value == float("inf"):
            raise BenchmarkUsageError(f"{FLAG}: resource '{name}' needs a positive amount, not {amount!r}; "
                                      f"e.g. {EXAMPLE}")
        out[str(name)] = value
    return out


def job_needs(cfg: RunConfig, adapter: BenchmarkAdapter, task: Task) -> dict[str, float]:
    """Everything one job asks Ray for: the CPU share, `--ray-resources`, then the task's own needs (the larger
    amount of a resource named by both)."""
    needs = {"CPU": CPU_SHARE, **cfg.ray_resources}
    for name, amount in adapter.cluster_resources(task, cfg.load).items():
        needs[name] = max(amount, needs.get(name, 0.0))
    return needs


def ray_options(needs: dict[str, float]) -> dict[str, Any]:
    """`needs` as the options of a Ray remote call. SPREAD: jobs go to every node that can run them, so each
    node's own providers (its VM pool, its Docker engine) share the work."""
    custom = {k: v for k, v in needs.items() if k not in ("CPU", "GPU", "memory")}
    options: dict[str, Any] = {"num_cpus": needs.get("CPU", CPU_SHARE), "resources": custom,
                               "scheduling_strategy": "SPREAD", "max_retries": 0}
    if "GPU" in needs:
        options["num_gpus"] = needs["GPU"]
    if "memory" in needs:
        options["memory"] = needs["memory"]
    return options


def alive_nodes() -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def _fits(node: dict[str, Any], needs: dict[str, float]) -> bool:
    have = node.get("Resources") or {}
    return all(have.get(name, 0.0) >= amount for name, amount in needs.items())


def _advertised(nodes: list[dict[str, Any]]) -> str:
    names = sorted({k for n in nodes for k in (n.get("Resources") or {})
                    if not k.startswith("node:") and k not in ("object_store_memory",)})
    return ", ".join(names) or "nothing"


def check_placement(cfg: RunConfig, adapter: BenchmarkAdapter, tasks: Iterable[Task]) -> None:
    """Before the run: every job's needs fit some alive node, or one line naming the resource and the fix."""
    nodes = alive_nodes()
    unmet: dict[tuple, list[str]] = {}
    for task in tasks:
        needs = job_needs(cfg, adapter, task)
        if not any(_fits(n, needs) for n in nodes):
            unmet.setdefault(tuple(sorted(needs.items())), []).append(task.id)
    if not unmet:
        return
    needs_key, ids = next(iter(unmet.items()))
    needs = dict(needs_key)
    missing = sorted(name for name, amount in needs.items()
                     if not any((n.get("Resources") or {}).get(name, 0.0) >= amount for n in nodes))
    what = ", ".join(f"{name}={needs[name]:g}" for name in (missing or sorted(needs)))
    count = sum(len(v) for v in unmet.values())
    raise BenchmarkUsageError(
        f"{count} task(s) (first: '{ids[0]}') need {what} and no node of the Ray cluster has it "
        f"({len(nodes)} node(s) advertise: {_advertised(nodes)}); start a node that can run them with "
        f"`ray start --address <head> --resources '{json.dumps({m: needs[m] for m in missing} or needs)}'`, "
        f"or leave those tasks out (--task-ids) or lower {FLAG}")

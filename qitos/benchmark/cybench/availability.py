"""Scoring side. Can a CyBench task run here? One check for `qit bench list`, `qit bench run` and the oracle.

A task that cannot run ends `requires_unavailable` with the reason before anything is staged or built. The
checks, in order: the bwrap sandbox; for service tasks the Docker engine, service files this data copy can
start, and every base image their Dockerfiles build FROM present in the local engine (only the engine is
asked, never a registry: a build that has to pull fails where no registry is reachable); for the oracle, a
reference solution that can reproduce the scored flag (`data_issues`). `runnable_here` counts them per split
for `qit bench list`, with the sandbox packages each task's requirements.sh names (one sandbox probe for all).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.cybench.data_issues import oracle_blocking_issue
from qitos.benchmark.cybench.options import CybenchOptions
from qitos.benchmark.cybench.requirements import RequirementsReport, check_in_sandbox, read_requirements
from qitos.benchmark.cybench.runtime import CybenchRuntime, docker_available, requires_unavailable_reason
from qitos.benchmark.cybench.selection import data_root
from qitos.benchmark.cybench.services import plan_for
from qitos.benchmark.cybench.solution import SOLUTION_SUBDIR, solution_command
from qitos.benchmark.cybench.tasks import CybenchTask, CybenchTaskError, load_tasks
from qitos.benchmark.cybench.toolchain import resolve_toolchain
from qitos.sandbox.bwrap import BwrapSandbox, remove_tree

BASE_IMAGES_SUMMARY = ("its base images are not in the local Docker engine (docker pull them, or run where a "
                       "registry is reachable)")


def missing_base_images(task: CybenchTask, pulled: dict[str, bool] | None = None) -> list[str]:
    """Base images the task's service builds need that the local Docker engine does not hold.

    `pulled` caches the engine's answers across tasks (image -> present)."""
    from qitos.benchmark.cybench.stack import images_missing_locally

    pulled = {} if pulled is None else pulled
    plan = plan_for(task)
    images = list(dict.fromkeys(i for s in (plan.services if plan else []) for i in s.base_images()))
    unknown = [i for i in images if i not in pulled]
    missing = set(images_missing_locally(unknown))
    pulled.update({i: i not in missing for i in unknown})
    return [i for i in images if not pulled[i]]


def unavailable_reason(task: CybenchTask, *, pulled: dict[str, bool] | None = None) -> str | None:
    """Why `task` cannot run here (sandbox, Docker, service files, base images), or None."""
    reason = requires_unavailable_reason(task)
    if reason is not None or not task.needs_service:
        return reason
    missing = missing_base_images(task, pulled)
    if missing:
        return (f"{task.task_id} {task.service_description()}; its Dockerfiles build FROM {', '.join(missing)}, "
                "which the local Docker engine does not hold (QitOS asks only the engine; a build would reach for "
                f"a registry): run `docker pull {' '.join(missing)}` where a registry is reachable, then run again")
    return None


def oracle_unavailable_reason(task: CybenchTask, *, pulled: dict[str, bool] | None = None) -> str | None:
    """`unavailable_reason`, plus why the oracle cannot check this task (no solution, a known data issue).

    `task` must be the full record (with gold)."""
    reason = unavailable_reason(task, pulled=pulled)
    if reason is not None:
        return reason
    if solution_command(task) is None:
        return f"{task.task_dir / SOLUTION_SUBDIR} holds no solution.sh or solve.py"
    issue = oracle_blocking_issue(task)
    return f"the oracle cannot check {task.task_id}: known data issue: {issue}" if issue else None


def runnable_here(load: LoadOptions) -> dict[str, dict[str, Any]]:
    """Per split: tasks whose services (Docker) and sandbox packages (requirements.sh) are present here, and per
    reason how many are not; the oracle's count beside it. One sandbox probe checks every task's packages at once."""
    root = data_root(load)
    out: dict[str, dict[str, Any]] = {}
    available: dict[tuple[str, str], bool | None] = {}  # (kind, name) -> present in the sandbox
    pulled: dict[str, bool] = {}  # base image -> present in the local Docker engine
    for split in ("unguided", "guided"):
        try:
            records = load_tasks(root, split)
        except CybenchTaskError:
            continue
        reports = {r.task_id: read_requirements(r.task_id, r.task_dir) for r in records}
        unknown = [q for rep in reports.values() for q in rep.requirements if (q.kind, q.name) not in available]
        if unknown and records:
            merged = RequirementsReport(task_id="all", source="every task of the split", requirements=unknown)
            available.update({(q.kind, q.name): q.available
                              for q in _probe(merged, check_in_sandbox, records[0], load).requirements})
        reasons: Counter = Counter()
        oracle_reasons: Counter = Counter()
        for record in records:
            reason = requires_unavailable_reason(record)
            if reason is not None and record.needs_service:
                docker_ok, _ = docker_available()
                reason = ("needs a service and Docker is not available" if not docker_ok
                          else "its services cannot be built from this data copy")
            if reason is None and record.needs_service:
                reason = _base_images_reason(record, pulled)
            if reason is None:
                lacking = [f"{q.kind}:{q.name}" for q in reports[record.task_id].requirements
                           if not available.get((q.kind, q.name), False)]
                reason = f"sandbox lacks {', '.join(lacking)}" if lacking else None
            if reason:
                reasons[reason] += 1
            elif (why := _oracle_summary(record)) is not None:  # runs here, but the oracle cannot check it
                oracle_reasons[why] += 1
        runnable = len(records) - sum(reasons.values())
        out[split] = {"tasks": len(records), "runnable": runnable, "reasons": dict(reasons.most_common()),
                      "recipes": {"oracle": {"runnable": runnable - sum(oracle_reasons.values()),
                                             "reasons": dict(oracle_reasons.most_common())}}}
    return out


def _base_images_reason(record: CybenchTask, pulled: dict[str, bool]) -> str | None:
    """`qit bench list`'s short form of `unavailable_reason`'s base-image check."""
    return BASE_IMAGES_SUMMARY if missing_base_images(record, pulled) else None


def _oracle_summary(record: CybenchTask) -> str | None:
    """`qit bench list`'s short form of the oracle's own check (`oracle_unavailable_reason`)."""
    if solution_command(record) is None:
        return "no reference solution in metadata/solution"
    issue = oracle_blocking_issue(record)
    return f"known data issue: {issue}" if issue else None


def _probe(report, check, record: CybenchTask, load: LoadOptions):
    """Check a requirements report in a throwaway sandbox set up as the tasks' own (used by `runnable_here`)."""
    ok, _ = BwrapSandbox.available()
    if not ok or not report.requirements:
        return report
    work = Path(tempfile.mkdtemp(prefix="qitos-cybench-probe-"))
    (work / "probe").mkdir()
    opts = CybenchOptions.from_load(load)
    try:
        with CybenchRuntime(record.without_gold(), work / "task", python_path=opts.python_path,
                            toolchain=resolve_toolchain(opts, load.data_dir)) as runtime:
            with runtime.sandbox(work / "probe", timeout_seconds=60) as box:
                return check(report, box)
    finally:
        remove_tree(work)

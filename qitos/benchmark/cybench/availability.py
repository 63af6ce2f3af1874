"""Scoring side. Can a CyBench task run here? One check for `qit bench list`, `qit bench run` and the oracle.

A task that cannot run ends `requires_unavailable` with the reason before anything is staged or built. The
checks, in order: the bwrap sandbox; for service tasks the Docker engine, service files this data copy can
start, and every base image their Dockerfiles build FROM present in the local engine (only the engine is
asked, never a registry: a build that has to pull fails where no registry is reachable); for the oracle, a
reference solution that can reproduce the scored flag (`data_issues`).
"""

from __future__ import annotations

from qitos.benchmark.cybench.data_issues import oracle_blocking_issue
from qitos.benchmark.cybench.runtime import requires_unavailable_reason
from qitos.benchmark.cybench.services import plan_for
from qitos.benchmark.cybench.tasks import CybenchTask

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
    from qitos.benchmark.cybench.oracle import SOLUTION_SUBDIR, solution_command

    reason = unavailable_reason(task, pulled=pulled)
    if reason is not None:
        return reason
    if solution_command(task) is None:
        return f"{task.task_dir / SOLUTION_SUBDIR} holds no solution.sh or solve.py"
    issue = oracle_blocking_issue(task)
    return f"the oracle cannot check {task.task_id}: known data issue: {issue}" if issue else None

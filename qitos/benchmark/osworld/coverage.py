"""Scoring side: how many OSWorld tasks the official evaluators can score here: for each task, do its metric functions and
getters resolve in the checkout's `desktop_env/evaluators`, and which optional packages (missing here) would
they need. `python -m qitos.benchmark.osworld <osworld root> [split]` prints the report as JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel

from qitos.benchmark.osworld.evaluator import resolve
from qitos.benchmark.osworld.tasks import OSWorldTask
from qitos.benchmark.osworld.upstream import UpstreamEvaluators


class CoverageReport(BaseModel):
    total_tasks: int
    scorable_tasks: int
    """Tasks whose every metric and getter resolves, with no missing optional package."""
    needs_package_tasks: int
    """Tasks that resolve but need an optional package that is not installed here."""
    needs_package: dict[str, int]
    """Optional package -> tasks that need it (a task may count under several)."""
    unsupported: dict[str, str]
    """Task id -> why the checkout cannot score it (a metric or getter it does not have)."""


def coverage_report(tasks: Iterable[OSWorldTask], evaluators: UpstreamEvaluators) -> CoverageReport:
    total = scorable = needing = 0
    packages: Counter[str] = Counter()
    unsupported: dict[str, str] = {}
    for task in tasks:
        total += 1
        found = resolve(task, evaluators)
        if found.status == "ready":
            scorable += 1
        elif found.packages:
            needing += 1
            packages.update(found.packages)
        else:
            unsupported[task.task_id] = found.reason or ""
    return CoverageReport(total_tasks=total, scorable_tasks=scorable, needs_package_tasks=needing,
                          needs_package=dict(packages.most_common()),
                          unsupported=unsupported)


def main(argv: list[str] | None = None) -> int:
    import sys

    from qitos.benchmark.osworld.tasks import load_tasks
    from qitos.benchmark.osworld.upstream import load_evaluators

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m qitos.benchmark.osworld <osworld root> [test_all|test_small]", file=sys.stderr)
        return 2
    tasks = load_tasks(args[0], args[1] if len(args) > 1 else "test_all")
    print(coverage_report(tasks, load_evaluators(args[0])).model_dump_json(indent=2))
    return 0

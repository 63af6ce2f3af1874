"""How much of OSWorld QitOS can score: implemented metrics and the share of tasks whose every metric
(and, optionally, every getter) is implemented."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel

from .getters import LOCAL_GETTERS, known_getter_types
from .metrics import implemented_metrics, is_implemented
from .tasks import OSWorldTask


class CoverageReport(BaseModel):
    total_tasks: int
    metric_covered_tasks: int
    metric_share: float
    getter_covered_tasks: int
    getter_share: float
    implemented_metrics: list[str]
    missing_metrics: dict[str, int]
    missing_getters: dict[str, int]


def coverage_report(tasks: Iterable[OSWorldTask], native_getters: Iterable[str] = ()) -> CoverageReport:
    """Metric coverage (every `func` implemented) and full coverage (metrics plus every getter, counting
    `native_getters` a provider would add, e.g. `ControllerProvider().native_getters()`)."""
    task_list = list(tasks)
    getters = known_getter_types() | LOCAL_GETTERS | frozenset(native_getters)
    missing_metrics: Counter[str] = Counter()
    missing_getters: Counter[str] = Counter()
    metric_ok = getter_ok = 0
    for task in task_list:
        funcs = [f for f in task.evaluator.funcs if not is_implemented(f)]
        absent = sorted(t for t in task.evaluator.getter_types() if t not in getters)
        missing_metrics.update(set(funcs))
        missing_getters.update(absent)
        if not funcs:
            metric_ok += 1
            if not absent:
                getter_ok += 1
    total = len(task_list)
    return CoverageReport(
        total_tasks=total,
        metric_covered_tasks=metric_ok,
        metric_share=metric_ok / total if total else 0.0,
        getter_covered_tasks=getter_ok,
        getter_share=getter_ok / total if total else 0.0,
        implemented_metrics=implemented_metrics(),
        missing_metrics=dict(missing_metrics.most_common()),
        missing_getters=dict(missing_getters.most_common()),
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m qitos.benchmark.osworld <data root> [split]`: print the coverage report as JSON."""
    import sys

    from .provider import ControllerProvider
    from .tasks import load_tasks

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m qitos.benchmark.osworld <osworld data root> [test_all|test_small]", file=sys.stderr)
        return 2
    tasks = load_tasks(args[0], args[1] if len(args) > 1 else "test_all")
    print(coverage_report(tasks, ControllerProvider.native_getters_static()).model_dump_json(indent=2))
    return 0

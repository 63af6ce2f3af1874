"""QitOS's own implementations of OSWorld metrics, looked up by the upstream metric name.

Every metric is `metric(result, expected=None, **options) -> float` in [0, 1]; see `general.py` for the
convention. Format libraries (openpyxl, python-docx, python-pptx, pypdf, Pillow) are imported lazily, so
importing this registry is cheap and works without the `osworld` extra.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UnsupportedMetric
from . import apps, archives, chrome, docs, general, images, pdf, slides, system, table

Metric = Callable[..., float]

METRICS: dict[str, Metric] = {}
for _module in (general, chrome, apps, system, table, docs, slides, pdf, images, archives):
    _overlap = set(METRICS) & set(_module.METRICS)
    if _overlap:
        raise RuntimeError(f"metric names defined twice: {sorted(_overlap)}")
    METRICS.update(_module.METRICS)

SPECIAL_FUNCS = frozenset({"infeasible"})
"""Evaluator `func` values handled by the evaluator itself rather than by a metric."""


def get_metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise UnsupportedMetric(f"metric '{name}' is not implemented by QitOS") from None


def is_implemented(name: str) -> bool:
    return name in METRICS or name in SPECIAL_FUNCS


def implemented_metrics() -> list[str]:
    return sorted(METRICS)


__all__ = ["METRICS", "Metric", "get_metric", "implemented_metrics", "is_implemented"]

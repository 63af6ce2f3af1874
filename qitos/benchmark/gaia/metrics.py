"""Scoring side (rows, never in a run): GAIA aggregates (accuracy overall and per level, with Wilson intervals) and
leaderboard export.

Works on result rows as dicts or objects (e.g. `BenchmarkRunResult`), reading `task_id`,
`success`, `prediction`, `trial`, `steps`, `token_usage`, `cost` and `metadata["level"]`.
A row is *unlabeled* (test split) when `metadata["labeled"]` is False (or, for rows without that key,
when `success` is None): it is counted separately and never enters an accuracy. A labeled row that
was not scored (setup failure, crash) counts as wrong: accuracy is over every labeled row, and
`scored` says how many of them the scorer saw.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

from pydantic import BaseModel

__all__ = ["Proportion", "GaiaMetrics", "wilson_interval", "gaia_metrics", "submission_rows", "write_submission"]

Z_95 = 1.959963984540054


def wilson_interval(successes: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; stays inside [0, 1] even at 0/n or n/n."""
    if total <= 0:
        raise ValueError("a confidence interval needs at least one observation")
    if not 0 <= successes <= total:
        raise ValueError(f"successes must lie in [0, {total}], got {successes}")
    p = successes / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


class Proportion(BaseModel):
    """k correct out of n, with accuracy and its 95% Wilson interval (None when n == 0)."""

    correct: int
    total: int
    accuracy: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    @classmethod
    def of(cls, correct: int, total: int) -> "Proportion":
        if total == 0:
            return cls(correct=0, total=0)
        low, high = wilson_interval(correct, total)
        return cls(correct=correct, total=total, accuracy=correct / total, ci_low=low, ci_high=high)


class GaiaMetrics(BaseModel):
    """What `qit bench eval` reports for GAIA."""

    rows: int
    overall: Proportion
    scored: int = 0  # labeled rows the scorer saw (the others count as wrong)
    by_level: dict[str, Proportion]
    unlabeled: int
    errors: int
    mean_steps: float | None = None
    mean_tokens: float | None = None
    total_cost: float | None = None
    mean_cost: float | None = None


def _field(row: Any, key: str, default: Any = None) -> Any:
    if isinstance(row, Mapping):
        return row.get(key, default)
    return getattr(row, key, default)


def _metadata(row: Any) -> Mapping[str, Any]:
    meta = _field(row, "metadata")
    return meta if isinstance(meta, Mapping) else {}


def _level(row: Any) -> str | None:
    level = _metadata(row).get("level", _field(row, "level"))
    return None if level is None else str(level).strip()


def _is_labeled(row: Any) -> bool:
    labeled = _metadata(row).get("labeled")
    if labeled is not None:
        return bool(labeled)
    return _field(row, "success") is not None


def _tokens(row: Any) -> float | None:
    usage = _field(row, "token_usage")
    if usage is None:
        return None
    total = _field(usage, "total_tokens")
    return None if total is None else float(total)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def gaia_metrics(results: Iterable[Any]) -> GaiaMetrics:
    """Accuracy overall and for levels 1-3 (always present, possibly 0/0), plus run statistics."""
    rows = list(results)
    labeled = [r for r in rows if _is_labeled(r)]
    by_level: dict[str, Proportion] = {}
    for level in ("1", "2", "3"):
        in_level = [r for r in labeled if _level(r) == level]
        by_level[level] = Proportion.of(sum(bool(_field(r, "success")) for r in in_level), len(in_level))
    steps = [float(s) for r in rows if isinstance(s := _field(r, "steps"), (int, float))]
    tokens = [t for r in rows if (t := _tokens(r)) is not None]
    costs = [float(c) for r in rows if isinstance(c := _field(r, "cost"), (int, float))]
    return GaiaMetrics(
        rows=len(rows),
        overall=Proportion.of(sum(bool(_field(r, "success")) for r in labeled), len(labeled)),
        scored=sum(1 for r in labeled if _field(r, "success") is not None),
        by_level=by_level,
        unlabeled=len(rows) - len(labeled),
        errors=sum(1 for r in rows if _field(r, "error")),
        mean_steps=_mean(steps),
        mean_tokens=_mean(tokens),
        total_cost=sum(costs) if costs else None,
        mean_cost=_mean(costs),
    )


def submission_rows(results: Iterable[Any], *, include_reasoning: bool = True) -> list[dict[str, str]]:
    """Leaderboard rows `{task_id, model_answer[, reasoning_trace]}`, one per task.

    With several trials of a task, the lowest trial number is submitted. A missing
    prediction is submitted as "" (the leaderboard needs every task present).
    """
    chosen: dict[str, Any] = {}
    for row in results:
        task_id = _field(row, "task_id")
        if not task_id:
            raise ValueError(f"result row without task_id: {row!r}")
        current = chosen.get(task_id)
        if current is None or (_field(row, "trial") or 0) < (_field(current, "trial") or 0):
            chosen[task_id] = row
    submission: list[dict[str, str]] = []
    for task_id, row in chosen.items():
        prediction = _field(row, "prediction")
        entry = {"task_id": str(task_id), "model_answer": "" if prediction is None else str(prediction)}
        trace = _field(row, "reasoning_trace") or _metadata(row).get("reasoning_trace")
        if include_reasoning and trace:
            entry["reasoning_trace"] = str(trace)
        submission.append(entry)
    return submission


def write_submission(rows: list[dict[str, str]], path: Path) -> Path:
    """Write leaderboard rows as JSONL (one object per line, UTF-8)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from qitos.trace.redact import redact_text

    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(redact_text(json.dumps(row, ensure_ascii=False)) + "\n")
    return path

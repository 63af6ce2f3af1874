"""Named answer scorers shared by generic benchmarks (`--scorer NAME`)."""

from __future__ import annotations

import re
from typing import Any, Callable

from qitos.benchmark.refs import load_ref

Scorer = Callable[[Any, Any], bool]


def exact(prediction: Any, answer: Any) -> bool:
    """Exact string equality after stripping surrounding whitespace."""
    return prediction is not None and str(prediction).strip() == str(answer).strip()


def normalized(prediction: Any, answer: Any) -> bool:
    """Case-insensitive, whitespace-collapsed, trailing punctuation ignored."""
    def norm(v: Any) -> str:
        return re.sub(r"\s+", " ", str(v)).strip().rstrip(".!").lower()

    return prediction is not None and norm(prediction) == norm(answer)


def contains(prediction: Any, answer: Any) -> bool:
    """The answer appears (case-insensitively) in the prediction."""
    return prediction is not None and str(answer).strip().lower() in str(prediction).lower()


def numeric(prediction: Any, answer: Any, tolerance: float = 1e-6) -> bool:
    """Both parse as numbers (commas, $ and % removed) and are equal within a tolerance."""
    def num(v: Any) -> float | None:
        try:
            return float(re.sub(r"[,$%\s]", "", str(v)))
        except ValueError:
            return None

    p, a = num(prediction), num(answer)
    return p is not None and a is not None and abs(p - a) <= tolerance * max(1.0, abs(a))


def gaia(prediction: Any, answer: Any) -> bool:
    """GAIA's official quasi-exact match (the GAIA family's scorer, named here, imported when used)."""
    return load_ref("qitos.benchmark.gaia.scorer:score_answer")(prediction, answer)


SCORERS: dict[str, Scorer] = {"exact": exact, "normalized": normalized, "contains": contains, "numeric": numeric,
                              "gaia": gaia}


def get_scorer(name: str) -> Scorer:
    from qitos.benchmark.errors import BenchmarkUsageError

    try:
        return SCORERS[name]
    except KeyError:
        raise BenchmarkUsageError(f"unknown scorer '{name}'; choose one of {', '.join(SCORERS)}") from None

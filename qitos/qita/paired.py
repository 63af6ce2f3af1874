"""Paired comparison of two result sets on the tasks they share.

Two agents run on the same tasks are paired data: the right test is McNemar's on the
discordant pairs (only A solved / only B solved), not a two-sample test on the rates. The
difference in success rate gets Newcombe's hybrid score interval for paired proportions
(method 10, Stat. Med. 1998), which behaves well at small n and near 0 or 1 where Wald fails.

Pairing unit: (task_id, trial) keys scored in both files. With one trial per task this is the
usual per-task pairing; with several trials, trial i of A is paired with trial i of B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from qitos.benchmark.metrics import wilson_interval

EXACT_BELOW = 25  # discordant pairs under this use the exact binomial test


def mcnemar(only_a: int, only_b: int) -> tuple[float, str]:
    """Two-sided p-value of McNemar's test and the method used."""
    n = only_a + only_b
    if n == 0:
        return 1.0, "no discordant pairs"
    if n < EXACT_BELOW:
        k = min(only_a, only_b)
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        return min(1.0, 2 * tail), "exact binomial"
    stat = (abs(only_a - only_b) - 1) ** 2 / n
    return math.erfc(math.sqrt(stat / 2)), "chi-square, continuity-corrected"


def paired_difference_ci(both: int, only_a: int, only_b: int, neither: int) -> tuple[float, float] | None:
    """95% interval for rate(A) - rate(B) on paired data (Newcombe method 10)."""
    n = both + only_a + only_b + neither
    if n == 0:
        return None
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson_interval(both + only_a, n)
    l2, u2 = wilson_interval(both + only_b, n)
    denom = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    # Newcombe's phi with his continuity correction: shrink a positive association by n/2.
    cross = both * neither - only_a * only_b
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = corrected / math.sqrt(denom) if denom else 0.0
    d = p1 - p2
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    eps = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, d - delta), min(1.0, d + eps)


@dataclass
class Pair:
    task_id: str
    trial: int
    a: bool
    b: bool
    a_run: str | None
    b_run: str | None

    @property
    def outcome(self) -> str:
        return {(True, True): "both", (True, False): "only_a", (False, True): "only_b"}.get((self.a, self.b), "neither")


@dataclass
class PairedComparison:
    unit: str
    pairs: list[Pair]
    shared_tasks: int
    tasks_only_in_a: int
    tasks_only_in_b: int
    counts: dict[str, int] = field(default_factory=dict)
    rate_a: float | None = None
    rate_b: float | None = None
    difference: float | None = None
    ci95: tuple[float, float] | None = None
    p_value: float = 1.0
    test: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "pairs": len(self.pairs), "shared_tasks": self.shared_tasks,
                "tasks_only_in_a": self.tasks_only_in_a, "tasks_only_in_b": self.tasks_only_in_b,
                "counts": self.counts, "rate_a": self.rate_a, "rate_b": self.rate_b, "difference": self.difference,
                "ci95": list(self.ci95) if self.ci95 else None, "mcnemar_p": self.p_value, "test": self.test}


def _scored(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(str(r["task_id"]), int(r.get("trial") or 0)): r for r in rows if isinstance(r.get("success"), bool)}


def compare_paired(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]) -> PairedComparison:
    """Pair deduplicated rows of A and B on (task_id, trial) and summarize."""
    a, b = _scored(rows_a), _scored(rows_b)
    tasks_a, tasks_b = {k[0] for k in a}, {k[0] for k in b}
    shared = sorted(set(a) & set(b))
    pairs = [Pair(t, trial, bool(a[(t, trial)]["success"]), bool(b[(t, trial)]["success"]),
                  a[(t, trial)].get("trace_run_dir"), b[(t, trial)].get("trace_run_dir")) for t, trial in shared]
    unit = "task" if all(trial == 0 for _, trial in shared) else "task × trial"
    out = PairedComparison(unit, pairs, len(tasks_a & tasks_b), len(tasks_a - tasks_b), len(tasks_b - tasks_a))
    counts = {"both": 0, "only_a": 0, "only_b": 0, "neither": 0}
    for pair in pairs:
        counts[pair.outcome] += 1
    out.counts = counts
    n = len(pairs)
    if n:
        out.rate_a = (counts["both"] + counts["only_a"]) / n
        out.rate_b = (counts["both"] + counts["only_b"]) / n
        out.difference = out.rate_b - out.rate_a  # B − A, the board's one sign convention
        a_minus_b = paired_difference_ci(counts["both"], counts["only_a"], counts["only_b"], counts["neither"])
        out.ci95 = (-a_minus_b[1], -a_minus_b[0]) if a_minus_b else None
    out.p_value, out.test = mcnemar(counts["only_a"], counts["only_b"])
    return out

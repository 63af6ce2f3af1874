"""Tau-Bench's own figures over result rows: average reward and pass^k, overall and per domain.

pass^k (upstream's pass-hat-k) is, averaged over tasks, the chance that k trials drawn without
replacement from the task's n trials all pass: C(c, k) / C(n, k) with c passing trials. A trial
passes when its reward is within 1e-6 of 1. Rows that ended in an error score reward 0, as
upstream records a crashed episode. Tasks with fewer than k trials do not enter pass^k.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

SUCCESS_TOLERANCE = 1e-6


def row_reward(row: dict[str, Any]) -> float:
    """The row's reward: metadata.reward, else the score, else 0 (no reward recorded)."""
    for value in ((row.get("metadata") or {}).get("reward"), row.get("score")):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return 0.0


def row_domain(row: dict[str, Any]) -> str:
    return str(row.get("subset") or (row.get("metadata") or {}).get("domain") or "retail")


def pass_hat_k(trials: dict[str, list[float]], k: int) -> float | None:
    values = []
    for rewards in trials.values():
        n = len(rewards)
        if n >= k:
            c = sum(1 for reward in rewards if abs(reward - 1.0) <= SUCCESS_TOLERANCE)
            values.append(math.comb(c, k) / math.comb(n, k))
    return sum(values) / len(values) if values else None


def domain_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    trials: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        trials[str(row["task_id"])].append(row_reward(row))
    rewards = [reward for per_task in trials.values() for reward in per_task]
    max_trials = max((len(per_task) for per_task in trials.values()), default=0)
    out: dict[str, Any] = {
        "average_reward": sum(rewards) / len(rewards) if rewards else None,
        "tasks": len(trials),
        "trials": max_trials,
    }
    for k in range(1, max_trials + 1):
        out[f"pass^{k}"] = pass_hat_k(trials, k)
    return out


def tau_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall figures, plus "<domain> <figure>" entries when the rows span several domains."""
    if not rows:
        return {}
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_domain[row_domain(row)].append(row)
    # A task id names its domain, so pooling the domains keeps tasks apart.
    out = {"domains": ", ".join(sorted(by_domain)), **domain_metrics(rows)}
    if len(by_domain) > 1:
        for domain in sorted(by_domain):
            for key, value in domain_metrics(by_domain[domain]).items():
                out[f"{domain} {key}"] = value
    return out

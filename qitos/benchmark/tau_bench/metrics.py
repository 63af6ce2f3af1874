"""Tau-Bench's own figures over result rows: average reward and pass^k, overall and per domain.

Computed as upstream's ``run.py`` (``display_metrics``) does: the average reward is over all rows;
n is the number of distinct trial numbers among the rows, and pass^k (pass-hat-k) averages over
tasks C(c, k) / C(n, k), with c the task's passing rows (reward within 1e-6 of 1), for k = 1..n.
Rows that ended in an error score reward 0, as upstream records a crashed episode.
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


def pass_hat_k(passes: dict[str, int], trials: int, k: int) -> float | None:
    """Upstream's pass^k: mean over tasks of C(c, k) / C(trials, k)."""
    if not passes or k > trials:
        return None
    return sum(math.comb(c, k) / math.comb(trials, k) for c in passes.values()) / len(passes)


def domain_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    rewards = [row_reward(row) for row in rows]
    passes: dict[str, int] = defaultdict(int)
    for row, reward in zip(rows, rewards):
        passes[str(row["task_id"])] += 1 if abs(reward - 1.0) <= SUCCESS_TOLERANCE else 0
    trials = len({int(row.get("trial") or 0) for row in rows})
    out: dict[str, Any] = {
        "average_reward": sum(rewards) / len(rewards) if rewards else None,
        "tasks": len(passes),
        "trials": trials,
    }
    for k in range(1, trials + 1):
        out[f"pass^{k}"] = pass_hat_k(passes, trials, k)
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

"""Scoring side (rows, never in a run): Tau-Bench's figures over result rows: average reward and pass^k, overall and per domain.

pass^k (upstream's pass-hat-k) is, averaged over tasks, the chance that k trials drawn without
replacement from the task's n trials all pass: C(c, k) / C(n, k) with c passing trials. A trial
passes when its reward is within 1e-6 of 1.

Two versions. ``average_reward`` and ``pass^k`` are QitOS's: n is the number of trials requested,
a trial that crashed, was not scored or has no row at all is a failure (reward 0), and every
selected task enters the mean, so missing work never raises the figures. ``upstream_average_reward``
and ``upstream_pass^k`` are upstream's headline, computed as ``display_metrics`` in upstream's
run.py computes it: over the rows there are, n the number of distinct trials among them, the tasks
those rows name. Upstream writes a row for every run (a crash is reward 0), so on a complete run
the two agree; on an incomplete one only QitOS's counts what is missing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from qitos.benchmark.metrics import selection

SUCCESS_TOLERANCE = 1e-6


def row_reward(row: dict[str, Any]) -> float:
    """The row's reward: metadata.reward, else the score, else 0 (no reward recorded)."""
    for value in ((row.get("metadata") or {}).get("reward"), row.get("score")):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return 0.0


def row_domain(row: dict[str, Any]) -> str:
    return str(row.get("subset") or (row.get("metadata") or {}).get("domain") or "retail")


def pass_hat_k(trials: dict[str, list[float]], k: int, n: int, tasks: int) -> float | None:
    """Mean over `tasks` tasks of C(c, k) / C(n, k); tasks absent from `trials` count 0."""
    if tasks == 0 or k > n:
        return None
    total = 0.0
    for rewards in trials.values():
        c = min(n, sum(1 for reward in rewards if abs(reward - 1.0) <= SUCCESS_TOLERANCE))
        total += math.comb(c, k) / math.comb(n, k)
    return total / tasks


def domain_metrics(rows: list[dict[str, Any]], selected: tuple[int, int] | None = None) -> dict[str, Any]:
    """Average reward over every selected trajectory and pass^1..n; `selected` = (tasks, trials requested)."""
    trials: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        trials[str(row["task_id"])].append(row_reward(row))
    tasks, n = selected or selection(rows)
    tasks = max(tasks, len(trials))
    rewards = [reward for per_task in trials.values() for reward in per_task]
    slots = max(tasks * n, len(rewards))
    out: dict[str, Any] = {
        "average_reward": sum(rewards) / slots if slots else None,
        "tasks": tasks,
        "trials": n,
        "trajectories": len(rewards),
        "missing_trajectories": slots - len(rewards),
    }
    for k in range(1, n + 1):
        out[f"pass^{k}"] = pass_hat_k(trials, k, n, tasks)
    out.update(upstream_metrics(rows))
    return out


def upstream_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Upstream run.py's ``display_metrics`` over these rows: its average reward and pass^1..n."""
    if not rows:
        return {}
    num_trials = len({row.get("trial") for row in rows})
    rewards = [row_reward(row) for row in rows]
    passes: dict[str, int] = {}
    for row, reward in zip(rows, rewards):
        task = str(row["task_id"])
        passes[task] = passes.get(task, 0) + (1 if 1 - SUCCESS_TOLERANCE <= reward <= 1 + SUCCESS_TOLERANCE else 0)
    out: dict[str, Any] = {"upstream_average_reward": sum(rewards) / len(rewards)}
    for k in range(1, num_trials + 1):
        out[f"upstream_pass^{k}"] = sum(math.comb(c, k) / math.comb(num_trials, k) for c in passes.values()) / len(passes)
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
        n = selection(rows)[1]
        for domain in sorted(by_domain):
            in_domain = by_domain[domain]
            for key, value in domain_metrics(in_domain, (len({r["task_id"] for r in in_domain}), n)).items():
                out[f"{domain} {key}"] = value
    return out

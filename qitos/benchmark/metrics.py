"""Aggregate result rows: success with a 95% interval, pass^k, stop reasons, cost, plugin metrics.

Works on plain dicts (not pydantic objects) so `qit bench eval` stays fast on 100,000 rows.
pass^k for a task with n trials and c successes is C(c,k)/C(n,k); the reported value is the
mean over tasks with at least k trials.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable


def wilson_interval(successes: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    if total == 0:
        return (0.0, 0.0)
    p = successes / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_hat_k(per_task: dict[str, tuple[int, int]], k: int) -> float | None:
    """Mean over tasks (with n ≥ k trials) of C(c, k) / C(n, k)."""
    values = [math.comb(c, k) / math.comb(n, k) for n, c in per_task.values() if n >= k]
    return sum(values) / len(values) if values else None


def dedupe(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last row per (benchmark, split, subset, model, task, trial): a later rerun wins."""
    latest: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row.get("benchmark"), row.get("split"), row.get("subset"), row.get("model"), row["task_id"], row.get("trial", 0))
        latest[key] = row
    return list(latest.values())


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r.get("success") is not None]
    successes = sum(1 for r in scored if r["success"])
    per_task: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in scored:
        entry = per_task[r["task_id"]]
        entry[0] += 1
        entry[1] += 1 if r["success"] else 0
    max_trials = max((n for n, _ in per_task.values()), default=0)
    tasks = {k: (v[0], v[1]) for k, v in per_task.items()}
    scores = [r["score"] for r in rows if isinstance(r.get("score"), (int, float))]
    tokens = [((r.get("token_usage") or {}).get("total_tokens") or 0) for r in rows]
    costs = [r["cost"] for r in rows if isinstance(r.get("cost"), (int, float))]
    latencies = [r.get("latency_seconds") or 0.0 for r in rows]
    low, high = wilson_interval(successes, len(scored))
    return {
        "total": len(rows),
        "tasks": len({r["task_id"] for r in rows}),
        "scored": len(scored),
        "successes": successes,
        "success_rate": successes / len(scored) if scored else None,
        "success_ci95": [low, high] if scored else None,
        "mean_score": sum(scores) / len(scores) if scores else None,
        "pass_hat_k": {str(k): pass_hat_k(tasks, k) for k in range(1, max_trials + 1)},
        "stop_reasons": dict(Counter(r.get("stop_reason") for r in rows).most_common()),
        "mean_steps": sum(r.get("steps") or 0 for r in rows) / len(rows) if rows else None,
        "total_tokens": sum(tokens),
        "mean_tokens": sum(tokens) / len(rows) if rows else None,
        "total_cost": sum(costs) if costs else None,
        "cost_unknown_rows": len(rows) - len(costs),
        "mean_latency_seconds": sum(latencies) / len(rows) if rows else None,
    }


def group_rows(rows: list[dict[str, Any]], by: list[str]) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(row.get(k) for k in by)].append(row)
    return groups


def evaluate_rows(rows: list[dict[str, Any]], by: list[str], plugin_metrics=None) -> list[dict[str, Any]]:
    """One entry per group: {"group": {field: value}, "metrics": {...}, "benchmark_metrics": {...}}."""
    out = []
    for key, group in sorted(group_rows(dedupe(rows), by).items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        entry: dict[str, Any] = {"group": dict(zip(by, key)), "metrics": summarize(group)}
        if plugin_metrics is not None:
            entry["benchmark_metrics"] = plugin_metrics(group)
        out.append(entry)
    return out

"""Scoring side. OSWorld metrics over result rows (plain dicts), for `qit bench eval` and `OsworldAdapter.metrics`.

QitOS's headline counts every selected row: a task that could not be scored here counts 0 in `success_rate`
(score 1 only) and `mean_score` (partial credit included), with `coverage` beside them. Upstream's headline
(`show_result.py`, commit 89426951) is different and shown as `upstream`: the mean of the scores of the tasks that
wrote a `result.txt` (those upstream's loop scored; partial credit included), overall, per domain, and for its
three domain groups (Office, Daily, Professional). A row's `score` is what upstream's `result.txt` holds.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

_TASK_ID = re.compile(r"^osworld-([a-z0-9_]+)-(.+)$")

# show_result.py's groups of domains
DOMAIN_GROUPS = {
    "office": ("libreoffice_calc", "libreoffice_impress", "libreoffice_writer"),
    "daily": ("vlc", "thunderbird", "chrome"),
    "professional": ("gimp", "vs_code"),
}


def domain_of(task_id: str) -> str | None:
    match = _TASK_ID.match(task_id or "")
    return match.group(1) if match else None


def has_score(row: dict[str, Any]) -> bool:
    return isinstance(row.get("score"), (int, float)) and not isinstance(row.get("score"), bool)


def _rate(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if has_score(r)]
    return {"rows": len(rows), "scored": len(scored),
            "success_rate": _rate([1.0 if r.get("success") else 0.0 for r in rows]),
            "mean_score": _rate([float(r["score"]) if has_score(r) else 0.0 for r in rows]),
            "coverage": len(scored) / len(rows) if rows else None,
            "scored_success_rate": _rate([1.0 if r.get("success") else 0.0 for r in scored]),
            "scored_mean_score": _rate([float(r["score"]) for r in scored])}


def upstream_headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """show_result.py's figures: `runned` scored rows and their mean score, per domain and per group (None where a
    group ran nothing; upstream would divide by zero there)."""
    by_domain: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if has_score(row):
            by_domain[domain_of(row.get("task_id", "")) or "unknown"].append(float(row["score"]))
    every = [score for scores in by_domain.values() for score in scores]
    groups = {name: [s for d in domains for s in by_domain.get(d, [])] for name, domains in DOMAIN_GROUPS.items()}
    return {"runned": len(every), "success_rate": _rate(every),
            "by_domain": {d: {"runned": len(s), "success_rate": _rate(s)} for d, s in sorted(by_domain.items())},
            "by_group": {name: _rate(scores) for name, scores in groups.items()}}


def osworld_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """QitOS's figures over every row (overall and per domain), how many could not run here, and upstream's."""
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_domain[domain_of(row.get("task_id", "")) or "unknown"].append(row)
    out = summary(rows)
    out["requires_unavailable"] = sum(1 for r in rows if r.get("stop_reason") == "requires_unavailable")
    out["by_domain"] = {d: summary(group) for d, group in sorted(by_domain.items())}
    out["upstream"] = upstream_headline(rows)
    return out

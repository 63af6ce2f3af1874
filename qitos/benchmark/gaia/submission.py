"""Scoring side: GAIA's leaderboard submission from results rows (`qit bench export --format gaia-submission`).

A submission is one agent's answers: rows of another benchmark, of several configurations, or two rows of
the same task and trial are refused with one line naming them, never merged silently.
"""

from __future__ import annotations

import json
from typing import Any

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.gaia.metrics import submission_rows


def submission_text(rows: list[dict[str, Any]]) -> str:
    """The leaderboard's JSON lines ({task_id, model_answer[, reasoning_trace]}), one per task."""
    others = sorted({str(r.get("benchmark")) for r in rows} - {"gaia"})
    if others:
        raise BenchmarkUsageError(f"--format gaia-submission: the input holds rows of {', '.join(others)}; "
                                  "give only GAIA results files")
    configs = sorted({str(r.get("run_spec_ref")) for r in rows})
    if len(configs) > 1:
        raise BenchmarkUsageError(f"--format gaia-submission: the input mixes {len(configs)} configurations "
                                  f"({', '.join(configs)}); a submission is one agent's answers: give one of them")
    seen: dict[tuple, int] = {}
    for r in rows:
        key = (r["task_id"], r.get("trial", 0))
        seen[key] = seen.get(key, 0) + 1
    dupes = sorted(f"{t} (trial {n})" for (t, n), count in seen.items() if count > 1)
    if dupes:
        raise BenchmarkUsageError(f"--format gaia-submission: duplicate rows for {', '.join(dupes[:5])}"
                                  + (f" and {len(dupes) - 5} more" if len(dupes) > 5 else "")
                                  + "; keep one row per task and trial")
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in submission_rows(rows))

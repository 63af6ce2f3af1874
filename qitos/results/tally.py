"""What a running batch remembers of its finished rows: counts, not the rows.

Rows go to the results file as they finish; the end-of-run summary (success, coverage, tokens, cost, stop
reasons, the do-nothing floor, outside-the-agent failures) needs only these counters, so a run of 100,000
tasks holds no more than a run of 1,000 (issue 34: memory flat in the number of tasks).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from qitos.core.stop import OUTSIDE_AGENT

from qitos.benchmark.floor import FloorCount
from qitos.run.sides.evidence import CLAIM_KEY
from qitos.benchmark.metrics import proportion

FAILED_REASONS = frozenset({"error", *OUTSIDE_AGENT})  # the run itself failed, not the agent at the task


class RunTally:
    def __init__(self) -> None:
        self.finished = 0
        self.scored = 0
        self.successes = 0
        self.failed = 0  # rows whose run failed (FAILED_REASONS)
        self.tokens = 0
        self.cost = 0.0
        self.reasons: Counter = Counter()
        self.claimed: Counter = Counter()  # outside failures the agent claimed and the scoring side overruled
        self.floor = FloorCount()

    def add(self, row: Any) -> None:
        """Count one finished row (a BenchmarkRunResult)."""
        self.finished += 1
        if row.success is not None:
            self.scored += 1
            self.successes += 1 if row.success else 0
        self.failed += row.stop_reason in FAILED_REASONS
        self.reasons[row.stop_reason] += 1
        self.tokens += row.token_usage.total_tokens
        self.cost += row.cost or 0.0
        self.floor.add({"task_id": row.task_id, "success": row.success, "metadata": row.metadata})
        claimed = (row.metadata or {}).get(CLAIM_KEY)
        if claimed:
            self.claimed[str(claimed)] += 1

    @property
    def outside(self) -> dict[str, int]:
        """Rows that failed outside the agent, by stop reason."""
        return {reason: n for reason, n in sorted(self.reasons.items()) if reason in OUTSIDE_AGENT}

    def proportion(self, selected: int) -> dict[str, Any]:
        """Success over every selected job (unscored and missing ones count as failures), and coverage."""
        return proportion(self.successes, self.scored, max(selected, self.finished))

"""The run's numbers (budgets, concurrency, trials, limit, generation limits), checked before anything runs.

A step budget of 0 or a negative timeout would otherwise run every task into `error` one by one; each bad
value is one `BenchmarkUsageError` naming the flag, the value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from qitos.run.config import RunConfig
from qitos.benchmark.errors import BenchmarkUsageError


@dataclass(frozen=True)
class Bound:
    flag: str
    minimum: float
    inclusive: bool  # minimum allowed (>=) or not (>)
    fix: str  # what it is, or what to do instead, e.g. "leave it out for the benchmark's step budget"

    def problem(self, value: Any) -> str | None:
        if value is None:
            return None
        number = float(value)
        ok = math.isfinite(number) and (number >= self.minimum if self.inclusive else number > self.minimum)
        if ok:
            return None
        need = f"at least {_num(self.minimum)}" if self.inclusive else f"more than {_num(self.minimum)}"
        return f"{self.flag} {_num(value)}: must be {need} ({self.fix})"


def _num(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


BOUNDS = {
    "concurrency": Bound("--concurrency", 1, True, "tasks in flight"),
    "trials": Bound("--trials", 1, True, "runs of each task"),
    "limit": Bound("--limit", 1, True, "leave it out to run every task"),
    "max_steps": Bound("--max-steps", 1, True, "leave it out for the benchmark's step budget"),
    "task_timeout": Bound("--task-timeout", 0, False, "seconds per task; leave it out for the benchmark's limit"),
    "max_tokens": Bound("--max-tokens", 1, True, "leave it out for the model's default"),
    "temperature": Bound("--temperature", 0, True, "leave it out for 0, greedy"),
}


def check_budgets(cfg: RunConfig) -> None:
    """Refuse a budget, count or generation limit that cannot work (the first one found)."""
    values = {"concurrency": cfg.concurrency, "trials": cfg.trials, "limit": cfg.load.limit,
              "max_steps": cfg.max_steps, "task_timeout": cfg.task_timeout, "max_tokens": cfg.model.max_tokens,
              "temperature": cfg.model.temperature}
    for key, value in values.items():
        problem = BOUNDS[key].problem(value)
        if problem:
            raise BenchmarkUsageError(problem)

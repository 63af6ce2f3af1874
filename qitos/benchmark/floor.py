"""The do-nothing floor: the success rate an agent that does nothing reaches on the same selected tasks.

A success rate means little without it: on Tau-Bench airline test, 19 of 50 tasks need no write and no
output, so an agent that ends at once scores 1 on each; on OSWorld, an agent that answers FAIL at once
scores 1 on every infeasible task. Where a benchmark's scoring rule makes this computable from the gold,
its adapter says per task (`BenchmarkAdapter.do_nothing_success`, the rule in the family's `floor.py`), on
the scoring side, and every row records the answer as ``metadata.do_nothing_success`` (a bool, never the
gold itself), scored or not.

`floor_summary` counts it over the success rate's own denominator, every selected task × trial: a task
whose rows carry the flag counts it on each of its trials, rows that ran or not (the rule depends on the
task only). A task × trial whose task has no row with the flag (it never ran, or an older row lacks it)
is unknown: the floor counts it 0 and says how many there are and how high the floor could be
(``rate_max``), so a partial run never shows a floor lower than it is without saying so.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qitos.core.task import Task

    from qitos.benchmark.base import BenchmarkAdapter, LoadOptions

FLOOR_KEY = "do_nothing_success"  # the row metadata key
NAME = "do-nothing floor"


def task_floor(adapter: "BenchmarkAdapter", task: "Task", load: "LoadOptions") -> bool | None:
    """The adapter's answer for one task; None when it has no rule, or when the rule cannot be applied (a row
    is written either way: the floor then counts that task as unknown)."""
    try:
        value = adapter.do_nothing_success(task, load)
    except Exception:  # noqa: BLE001 - the row matters more than its floor flag; eval reports the task unknown
        return None
    return value if isinstance(value, bool) else None


def with_floor(metadata: dict[str, Any] | None, value: bool | None) -> dict[str, Any]:
    """A row's metadata with the flag added (unchanged without one)."""
    out = dict(metadata or {})
    if value is not None:
        out[FLOOR_KEY] = value
    return out


def row_floor(row: dict[str, Any]) -> bool | None:
    value = (row.get("metadata") or {}).get(FLOOR_KEY)
    return value if isinstance(value, bool) else None


class FloorCount:
    """`floor_summary`'s counts, gathered one row at a time (a running batch keeps these, not its rows)."""

    def __init__(self) -> None:
        self.flags: dict[str, bool] = {}
        self.rows = 0
        self.per_task: Counter = Counter()  # rows per task
        self.scored_per_task: Counter = Counter()  # scored rows per task

    def add(self, row: dict[str, Any]) -> None:
        task_id = row["task_id"]
        self.rows += 1
        self.per_task[task_id] += 1
        if row.get("success") is not None:
            self.scored_per_task[task_id] += 1
        value = row_floor(row)
        if value is not None:
            self.flags.setdefault(task_id, value)

    def summary(self, selected_tasks: int, trials: int) -> dict[str, Any] | None:
        flags = self.flags
        if not flags:
            return None
        selected = max(selected_tasks * trials, self.rows)
        slots = {task_id: max(trials, self.per_task[task_id]) for task_id in flags}  # trials with or without a row
        successes = sum(n for task_id, n in slots.items() if flags[task_id])
        unknown = selected - sum(slots.values())
        scored = sum(self.scored_per_task.values())
        scored_successes = sum(n for task_id, n in self.scored_per_task.items() if flags.get(task_id) is True)
        scored_unknown = sum(n for task_id, n in self.scored_per_task.items() if task_id not in flags)
        return {
            "successes": successes, "selected": selected, "rate": successes / selected if selected else None,
            "unknown": unknown, "rate_max": (successes + unknown) / selected if selected else None,
            "tasks": sum(1 for value in flags.values() if value), "tasks_known": len(flags),
            "scored_successes": scored_successes, "scored": scored,
            "scored_rate": scored_successes / scored if scored else None, "scored_unknown": scored_unknown,
        }


def floor_summary(rows: list[dict[str, Any]], selected_tasks: int, trials: int) -> dict[str, Any] | None:
    """The floor over every selected task × trial of one configuration's rows (deduplicated), and over the
    scored rows; None when no row carries the flag (the benchmark has no rule, or the rows predate it)."""
    count = FloorCount()
    for row in rows:
        count.add(row)
    return count.summary(selected_tasks, trials)


def floor_text(floor: dict[str, Any] | None, scored: bool = False) -> str | None:
    """One line for a terminal or Markdown: `0.380  19/50`, and what is unknown."""
    if not floor:
        return None
    if scored:
        if floor["scored_rate"] is None:
            return None
        text = f"{floor['scored_rate']:.3f}   {floor['scored_successes']}/{floor['scored']}"
        unknown = floor["scored_unknown"]
        return text + (f"  ({unknown} scored rows of tasks without the flag count 0)" if unknown else "")
    if floor["rate"] is None:
        return None
    text = f"{floor['rate']:.3f}   {floor['successes']}/{floor['selected']}"
    if floor["unknown"]:
        text = (f"≥ {text}  ({floor['unknown']} task × trials of tasks with no row recording it count 0: "
                f"up to {floor['rate_max']:.3f})")
    return text

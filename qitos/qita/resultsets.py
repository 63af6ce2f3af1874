"""Results files as the Experiment page shows them: metrics, a task × trial grid, issues.

Rows are read tolerantly (`iter_rows`) and deduplicated the way `qit bench eval` does, so
the board and the CLI report the same numbers. Benchmark-specific metrics come from the
benchmark's adapter when it can be loaded; a missing plugin only hides that section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qitos.benchmark.metrics import ROW_REQUIRED, dedupe, summarize
from qitos.results.rows import RowIssue, iter_rows


@dataclass
class Cell:
    trial: int
    success: bool | None
    score: float | None
    stop_reason: str | None
    run_name: str | None  # trace directory name, when the row points at one
    error: str | None


@dataclass
class GridRow:
    task_id: str
    cells: list[Cell | None]
    solved: int
    scored: int


@dataclass
class ResultSet:
    path: Path
    rows: list[dict[str, Any]]
    issues: list[RowIssue]
    name: str | None = None  # a configuration's id, when the set is one configuration rather than a file
    title: str | None = None  # that configuration's name
    _metrics: dict[str, Any] | None = field(default=None, repr=False)
    _plugin: tuple[dict[str, Any], str | None] | None = field(default=None, repr=False)

    def _plugin_result(self) -> tuple[dict[str, Any], str | None]:
        """Benchmark metrics load the adapters (slow imports): only when a page shows them."""
        if self._plugin is None:
            self._plugin = _plugin_metrics(self.rows)
        return self._plugin

    @property
    def metrics(self) -> dict[str, Any]:
        if self._metrics is None:
            self._metrics = summarize(self.rows)
        return self._metrics

    @property
    def benchmark_metrics(self) -> dict[str, Any]:
        return self._plugin_result()[0]

    @property
    def benchmark_metrics_error(self) -> str | None:
        return self._plugin_result()[1]

    @property
    def label(self) -> str:
        return self.title or self.path.name

    @property
    def trials(self) -> list[int]:
        return sorted({int(r.get("trial") or 0) for r in self.rows})

    def grid(self) -> list[GridRow]:
        trials = self.trials
        by_task: dict[str, dict[int, dict[str, Any]]] = {}
        for row in self.rows:
            by_task.setdefault(str(row["task_id"]), {})[int(row.get("trial") or 0)] = row
        out = []
        for task_id in sorted(by_task):
            cells: list[Cell | None] = []
            for t in trials:
                r = by_task[task_id].get(t)
                cells.append(None if r is None else _cell(t, r))
            scored = [c for c in cells if c is not None and c.success is not None]
            out.append(GridRow(task_id, cells, sum(1 for c in scored if c.success), len(scored)))
        return out


def _cell(trial: int, row: dict[str, Any]) -> Cell:
    run_dir = row.get("trace_run_dir")
    success = row.get("success")
    score = row.get("score")
    return Cell(trial, success if isinstance(success, bool) else None,
                float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
                row.get("stop_reason"), Path(run_dir).name if isinstance(run_dir, str) and run_dir else None,
                str(row["error"])[:300] if row.get("error") else None)


def _plugin_metrics(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    from qitos.benchmark.registry import get_adapter

    out: dict[str, Any] = {}
    problems = []
    for name in sorted({str(r["benchmark"]) for r in rows if r.get("benchmark")}):
        try:
            metrics = get_adapter(name).metrics([r for r in rows if r.get("benchmark") == name])
        except Exception as exc:  # noqa: BLE001 - an unknown or broken plugin only hides its own metrics
            problems.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if metrics:
            out[name] = metrics
    return out, "; ".join(problems) or None


def load_result_set(path: Path) -> ResultSet:
    issues: list[RowIssue] = []
    rows = dedupe(iter_rows(path, issues, required=ROW_REQUIRED))  # the rows `qit bench eval` counts
    return ResultSet(path, rows, issues)

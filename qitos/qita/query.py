"""Filters, sorting, pagination and totals for the runs list, as SQL over the index.

Everything the runs page shows comes from here, so the page costs a few indexed queries
whatever the size of the logdir. Column names never come from the request: sorting uses a
whitelist, values are bound parameters.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping
from urllib.parse import urlencode

from .index import RunIndex

SORTABLE = {
    "created": "created_at", "run": "name", "status": "status", "benchmark": "benchmark", "split": "split",
    "model": "model", "task": "task_id", "steps": "steps", "tokens": "tokens", "cost": "cost", "latency": "latency",
    "stop": "stop_reason", "success": "success", "official": "official", "recipe": "recipe",
}
FACETS = ("benchmark", "split", "model", "status", "stop_reason")
MAX_PER_PAGE = 500


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value))) if value not in (None, "") else default
    except ValueError:
        return default


@dataclass
class RunFilter:
    benchmark: str = ""
    split: str = ""
    model: str = ""
    status: str = ""
    stop_reason: str = ""
    official: str = ""  # "yes" | "no" | ""
    success: str = ""  # "yes" | "no" | "unknown" | ""
    q: str = ""
    sort: str = "created"
    order: str = "desc"
    page: int = 1
    per_page: int = 50
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> "RunFilter":
        f = cls(**{k: (params.get(k) or "").strip()[:200] for k in
                   ("benchmark", "split", "model", "status", "stop_reason", "official", "success", "q")})
        f.sort = params.get("sort") or "created"
        if f.sort not in SORTABLE:
            f.errors.append(f"unknown sort '{f.sort}'; sorting by creation time")
            f.sort = "created"
        f.order = "asc" if params.get("order") == "asc" else "desc"
        f.page = _int(params.get("page"), 1, 1, 10**9)
        f.per_page = _int(params.get("per_page"), 50, 1, MAX_PER_PAGE)
        return f

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for col in FACETS:
            value = getattr(self, col)
            if value == "(none)":
                clauses.append(f"{col} IS NULL")
            elif value:
                clauses.append(f"{col} = ?")
                params.append(value)
        if self.official in ("yes", "no"):
            clauses.append("official = ?")
            params.append(1 if self.official == "yes" else 0)
        if self.success in ("yes", "no"):
            clauses.append("success = ?")
            params.append(1 if self.success == "yes" else 0)
        elif self.success == "unknown":
            clauses.append("success IS NULL")
        if self.q:
            for word in self.q.lower().split()[:8]:
                clauses.append("search LIKE ? ESCAPE '\\'")
                escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                params.append(f"%{escaped}%")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def params(self, **override: Any) -> dict[str, Any]:
        """Non-default query parameters (for links that keep the current filters)."""
        values = {k: v for k, v in asdict(self).items() if k != "errors"}
        values.update(override)
        defaults = {k: v for k, v in asdict(RunFilter()).items() if k != "errors"}
        return {k: v for k, v in values.items() if v != defaults.get(k)}

    def link(self, **override: Any) -> str:
        query = urlencode(self.params(**override))
        return "/runs" + (f"?{query}" if query else "")

    def sort_link(self, key: str) -> str:
        order = "asc" if self.sort == key and self.order == "desc" else "desc"
        return self.link(sort=key, order=order, page=1)


@dataclass
class RunPage:
    rows: list[dict[str, Any]]
    totals: dict[str, Any]
    status_counts: dict[str, int]
    facets: dict[str, list[str]]
    pages: int


class RunQueries:
    """Read side of the index for the runs page (facet values cached per index version)."""

    def __init__(self, index: RunIndex) -> None:
        self.index = index
        self._facets: tuple[int, dict[str, list[str]]] | None = None

    def facets(self) -> dict[str, list[str]]:
        version = self.index.version
        if self._facets is None or self._facets[0] != version:
            values = {col: [r[0] if r[0] is not None else "(none)" for r in
                            self.index.query(f"SELECT DISTINCT {col} FROM runs ORDER BY {col}")] for col in FACETS}
            self._facets = (version, values)
        return self._facets[1]

    def page(self, f: RunFilter) -> RunPage:
        where, params = f.where()
        totals_row = self.index.query(
            "SELECT COUNT(*) AS runs, COALESCE(SUM(tokens), 0) AS tokens, SUM(cost) AS cost, "
            "COUNT(cost) AS cost_known, AVG(latency) AS mean_latency, SUM(steps) AS steps, "
            "SUM(CASE WHEN success = 1 THEN 1 ELSE 0 END) AS successes, COUNT(success) AS scored, "
            f"SUM(official) AS official, COUNT(DISTINCT benchmark) AS benchmarks FROM runs{where}", params)[0]
        totals = dict(totals_row)
        totals["success_rate"] = totals["successes"] / totals["scored"] if totals["scored"] else None
        status_counts = {r[0]: r[1] for r in self.index.query(
            f"SELECT status, COUNT(*) FROM runs{where} GROUP BY status ORDER BY 2 DESC", params)}
        pages = max(1, -(-totals["runs"] // f.per_page))
        f.page = min(f.page, pages)
        col = SORTABLE[f.sort]
        direction = "ASC" if f.order == "asc" else "DESC"
        def order(t: str) -> str:
            return f"ORDER BY {t}{col} IS NULL, {t}{col} {direction}, {t}name {direction}"
        # Sort only the keys, then read the page's rows: a deep page no longer sorts thousands of whole rows.
        rows = self.index.query(
            f"SELECT runs.* FROM (SELECT name FROM runs{where} {order('')} LIMIT ? OFFSET ?) AS picked "
            f"JOIN runs ON runs.name = picked.name {order('runs.')}",
            [*params, f.per_page, (f.page - 1) * f.per_page])
        return RunPage([dict(r) for r in rows], totals, status_counts, self.facets(), pages)

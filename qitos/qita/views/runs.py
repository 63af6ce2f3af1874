"""Runs page: the filtered, sorted, paginated list of every run in the logdir, with totals."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..query import SORTABLE, RunFilter
from .common import board_of, page

COLUMNS = [("run", "run"), ("status", "status"), ("benchmark", "benchmark"), ("recipe", "recipe"), ("model", "model"),
           ("success", "success"), ("stop", "stop reason"), ("steps", "steps"), ("tokens", "tokens"),
           ("cost", "cost"), ("latency", "latency"), ("created", "created")]


def runs_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    board.refresh()
    f = RunFilter.from_params(request.query_params)
    result = board.queries.page(f)
    return page(request, "runs.html.j2", f=f, result=result, columns=COLUMNS, sortable=SORTABLE,
                total_runs=board.index.count(), result_issues=board.index.result_issues[:20])

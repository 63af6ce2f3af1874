"""Experiment page: results files — metrics, the task × trial grid, and A/B paired comparison.

Only files given to `qita board --results` can be opened (by position, `?f=0&f=1`): the
board never reads a path that comes from a request.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..paired import compare_paired
from .common import board_of, int_param, page
from .run import pager

TASKS_PER_PAGE = 100


def _selected(request: Request, available: int) -> list[int]:
    picked = []
    for raw in request.query_params.getlist("f"):
        try:
            n = int(raw)
        except ValueError:
            continue
        if 0 <= n < available and n not in picked:
            picked.append(n)
    if not picked:
        picked = list(range(min(2, available)))
    return picked


def experiment_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    files = board.config.results
    selected = _selected(request, len(files))
    sets = [board.result_set(n) for n in selected]
    grid_page = int_param(request, "gpage", 1)
    grids = []
    for rs in sets:
        rows = rs.grid()
        p = pager(len(rows), TASKS_PER_PAGE, grid_page)
        grids.append({"rows": rows[(p["page"] - 1) * TASKS_PER_PAGE: p["page"] * TASKS_PER_PAGE], "pager": p})
    paired = compare_paired(sets[0].rows, sets[1].rows) if len(sets) == 2 else None
    discordant = [p for p in paired.pairs if p.outcome in ("only_a", "only_b")][:200] if paired else []
    board.refresh()
    return page(request, "experiment.html.j2", files=files, selected=selected, sets=sets, grids=grids,
                paired=paired, discordant=discordant, known_run=board.known_run,
                grid_base="?" + "".join(f"f={n}&" for n in selected) + "gpage=",
                run_name=lambda path: Path(path).name if isinstance(path, str) and path else None)

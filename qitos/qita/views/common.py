"""Helpers every page uses: the Board from the request, rendering, integer query params."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..board import Board
from ..render import render


def board_of(request: Request) -> Board:
    return request.app.state.board


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    b = board_of(request)
    html = render(template, logdir=str(b.config.logdir), has_results=bool(b.config.results),
                  path=request.url.path, export=False, **context)
    return HTMLResponse(html, status_code=status_code)


def int_param(request: Request, name: str, default: int, low: int = 1, high: int = 10**9) -> int:
    raw = request.query_params.get(name)
    try:
        return max(low, min(high, int(raw))) if raw not in (None, "") else default
    except ValueError:
        return default

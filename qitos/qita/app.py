"""The board's ASGI app: routes, error pages, the guard middleware, static files.

`build_app(config)` is all a server (uvicorn), a test (TestClient) or the scale benchmark
needs. A failure while rendering one page is that page's error, shown with what went
wrong; it never takes the rest of the board down.
"""

from __future__ import annotations

import functools
import logging
import traceback
from typing import Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .board import Board, NotFound
from .config import BoardConfig
from .render import render
from .redaction import RedactMiddleware
from .security import GuardMiddleware
from .views.compare import compare_page
from .views.experiment import experiment_page
from .views.files import run_file
from .views.replay import replay_frame, replay_page
from .views.run import export_download, run_page
from .views.runs import runs_page

log = logging.getLogger("qitos.qita")


def _error(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    board: Board = request.app.state.board
    html = render("error.html.j2", status=status, title=title, detail=detail, logdir=str(board.config.logdir),
                  has_results=bool(board.config.results), path=request.url.path, export=False)
    return HTMLResponse(html, status_code=status)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(request, 404, "Not found", str(exc) if isinstance(exc, NotFound) else "no such page")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return _error(request, 404, "Not found", "no such page")
    return _error(request, exc.status_code, "Request failed", str(exc.detail))


def _safe(view: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """Turn a crash inside one page into that page's 500, inside the guard (so headers still apply)."""
    @functools.wraps(view)
    def wrapped(request: Request) -> Response:
        try:
            return view(request)
        except (NotFound, HTTPException):
            raise
        except Exception as exc:  # noqa: BLE001 - one bad run must not take the board down
            log.error("page %s failed:\n%s", request.url.path, "".join(traceback.format_exception(exc)))
            return _error(request, 500, "This page failed to render",
                          f"{type(exc).__name__}: {exc}. Other pages still work; the server log has the traceback.")
    return wrapped


def health(request: Request) -> JSONResponse:
    board: Board = request.app.state.board
    return JSONResponse({"ok": True, "runs": board.index.count()})


def build_app(config: BoardConfig, board: Board | None = None) -> Starlette:
    board = board or Board(config)
    routes = [
        Route("/", _safe(runs_page)),
        Route("/runs/{name}", _safe(run_page)),
        Route("/runs/{name}/replay", _safe(replay_page)),
        Route("/runs/{name}/replay/frame/{position:int}", _safe(replay_frame)),
        Route("/runs/{name}/files/{path:path}", _safe(run_file)),
        Route("/runs/{name}/export.html", _safe(export_download)),
        Route("/compare", _safe(compare_page)),
        Route("/experiment", _safe(experiment_page)),
        Route("/healthz", health),
        Mount("/static", StaticFiles(packages=[("qitos.qita", "static")]), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(GuardMiddleware, config=config),
                                                 Middleware(RedactMiddleware)],
                    exception_handlers={NotFound: _not_found, HTTPException: _http_error})
    app.state.board = board
    board.refresh(force=True)
    return app

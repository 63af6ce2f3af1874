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
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .board import Board, NotFound
from .config import BoardConfig
from .render import environment, render
from .redaction import RedactMiddleware
from .security import GuardMiddleware
from .plots import plotly_js_path
from .views.compare import compare_page
from .views.configs import benchmark_page, benchmarks_page, config_page, config_runs, configs_page
from .views.downloads import benchmark_export, export_download
from .views.experiment import experiment_page
from .views.files import run_file
from .views.replay import replay_frame, replay_page
from .views.run import run_page
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


def plotly_js(request: Request) -> Response:
    """plotly.min.js from the installed `plotly` package (never from a CDN, never vendored in the repo)."""
    path = plotly_js_path()
    if path is None:
        return _error(request, 404, "Not found", "the plotly package is not installed: pip install 'qitos[board]'")
    return FileResponse(path, media_type="text/javascript", headers={"cache-control": "public, max-age=86400"})


def build_app(config: BoardConfig, board: Board | None = None) -> Starlette:
    board = board or Board(config)
    routes = [
        Route("/", _safe(configs_page)),
        Route("/runs", _safe(runs_page)),
        Route("/configs/{ident}", _safe(config_page)),
        Route("/configs/{ident}/runs", _safe(config_runs)),
        Route("/benchmarks", _safe(benchmarks_page)),
        Route("/benchmarks/{name}", _safe(benchmark_page)),
        Route("/benchmarks/{name}/export.html", _safe(benchmark_export)),
        Route("/vendor/plotly.min.js", plotly_js),
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
    board.configs.all()  # configurations are computed with the index, not on the first page view
    for name in ("configs.html.j2", "benchmarks.html.j2", "benchmark.html.j2", "runs.html.j2", "run.html.j2"):
        environment().get_template(name)  # compiled once at start, not on a reader's first visit
    return app

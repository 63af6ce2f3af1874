"""The board's download links: a run's page or a benchmark's plots as the self-contained file `qita export` writes.

Apart from the pages they offer, so that the export (which builds on the run, replay and benchmark pages' views)
and those pages do not import each other.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .common import board_of


def export_download(request: Request) -> Response:
    """The same self-contained file `qita export` writes, offered as a download."""
    from ..export import render_run_html

    board = board_of(request)
    name = request.path_params["name"]
    html = render_run_html(board.run_dir(name))
    return Response(html, media_type="text/html; charset=utf-8",
                    headers={"content-disposition": f'attachment; filename="{name}.html"'})


def benchmark_export(request: Request) -> Response:
    """The benchmark page as one offline file (plotly.js and figures inlined), offered as a download."""
    from ..export import render_benchmark_html

    board = board_of(request)
    name = request.path_params["name"]
    html = render_benchmark_html(board, name, request.query_params.getlist("c"))
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    return Response(html, media_type="text/html; charset=utf-8",
                    headers={"content-disposition": f'attachment; filename="{safe}-plots.html"'})

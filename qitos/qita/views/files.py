"""Files of a run (screenshots): only regular files inside that run's directory, else 404.

Images are served as images; anything else as an attachment, and every file response carries
a sandboxing CSP, so a file written by an agent (say an .html or .svg) cannot run script in
the board's origin.
"""

from __future__ import annotations

import mimetypes

from starlette.requests import Request
from starlette.responses import FileResponse, Response

from ..board import NotFound
from ..security import FILE_CSP, safe_child
from .common import board_of

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})


def run_file(request: Request) -> Response:
    board = board_of(request)
    run_dir = board.run_dir(request.path_params["name"])
    target = safe_child(run_dir, request.path_params["path"])
    if target is None:
        raise NotFound("no such file in this run")
    mime = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    headers = {"content-security-policy": FILE_CSP, "cache-control": "private, max-age=60"}
    if mime in IMAGE_TYPES:
        return FileResponse(target, media_type=mime, headers=headers)
    return FileResponse(target, media_type="application/octet-stream", headers=headers, filename=target.name,
                        content_disposition_type="attachment")

"""Replay page: step through a run one step at a time, with the state reached at each step.

The page renders the requested step server-side (so it works without script and every step
has a URL); `static/replay.js` then fetches neighbouring steps as HTML fragments for
play / pause / next / previous / speed. The "state" of a step is what the run had consumed
and decided up to and including it: tokens, cost, time, the decision and its observations.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..board import NotFound
from ..render import render
from ..runtrace import RunFiles, StepDigest
from .common import board_of, int_param, page
from .run import board_assets, run_overview, step_views

STRIP_LIMIT = 600  # above this many steps the clickable strip gives way to the slider alone


def running_totals(digests: list[StepDigest], position: int) -> dict[str, Any]:
    """Totals over steps 1..position (1-based positions in the steps file)."""
    done = digests[:position]
    costs = [d.cost for d in done]
    return {"tokens": sum(d.tokens for d in done), "cost": None if any(c is None for c in costs) else sum(costs),
            "seconds": sum(d.latency for d in done), "tool_errors": sum(1 for d in done if d.tool_error),
            "parse_failures": sum(1 for d in done if d.parser_ok is False)}


def frame_context(board_name: str, files: RunFiles, position: int) -> dict[str, Any]:
    total = files.steps.count
    if total == 0:
        return {"position": 0, "total": 0, "step": None, "totals": None, "problems": []}
    position = min(max(1, position), total)
    steps = files.step_page(position - 1, 1)
    views, problems = step_views(files, steps, board_assets(board_name, files.run_dir))
    return {"position": position, "total": total, "step": views[0] if views else None,
            "totals": running_totals(files.digests(), position),
            "problems": [str(p) for p in steps.problems + problems]}


def replay_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    name = request.path_params["name"]
    files = board.run(name)
    frame = frame_context(name, files, int_param(request, "step", 1))
    digests = files.digests() if files.steps.count <= STRIP_LIMIT else []
    return page(request, "replay.html.j2", name=name, o=run_overview(files.manifest(), board.index.get(name)),
                frame=frame, strip=digests, problems=[str(p) for p in files.problems()])


def replay_frame(request: Request) -> HTMLResponse:
    board = board_of(request)
    name = request.path_params["name"]
    files = board.run(name)
    position = int(request.path_params["position"])
    if not 1 <= position <= files.steps.count:
        raise NotFound(f"run {name} has no step at position {position}")
    html = render("_replay_frame.html.j2", name=name, frame=frame_context(name, files, position), export=False)
    return HTMLResponse(html)

"""Compare page: two runs side by side — config diff, metric deltas, aligned steps, divergence.

Runs come from `?a=&b=` or from two `run=` checkboxes ticked on the runs page. Without a
`page` parameter the page opens on the page holding the first divergence, which is what a
reader comparing two runs of the same task wants to see.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..diff import (RUN_METRICS, config_diff, first_divergence, metric_deltas, reasoning_diff, reasoning_differs,
                    run_metrics, text_differs)
from ..board import Board
from ..spectree import build_tree, reproducibility, side_names
from .common import board_of, int_param, page
from .run import board_assets, pager, run_overview, step_views

PAIRS_PER_PAGE = 20


def _names(request: Request) -> tuple[str, str]:
    picked = [v for v in request.query_params.getlist("run") if v][:2]
    a = request.query_params.get("a") or (picked[0] if picked else "")
    b = request.query_params.get("b") or (picked[1] if len(picked) > 1 else "")
    return a.strip(), b.strip()


def _candidates(board: Board, name: str) -> list[dict[str, Any]]:
    """Other runs of the same task: the usual partner when one run is picked."""
    row = board.index.get(name) if name else None
    if not row or not row.get("task_id"):
        return []
    rows = board.index.query("SELECT name, status, model, stop_reason, created_at FROM runs WHERE task_id = ? "
                             "AND name != ? ORDER BY created_at DESC LIMIT 20", (row["task_id"], name))
    return [dict(r) for r in rows]


def compare_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    a, b = _names(request)
    if not a or not b:
        return page(request, "compare.html.j2", a=a, b=b, ready=False, candidates=_candidates(board, a or b))
    files = [board.run(a), board.run(b)]
    views = [f.manifest() for f in files]
    digests = [f.digests() for f in files]
    divergence = first_divergence(*digests)
    positions = max(len(digests[0]), len(digests[1]))
    default_page = divergence.position // PAIRS_PER_PAGE + 1 if divergence else 1
    p = pager(positions, PAIRS_PER_PAGE, int_param(request, "page", default_page))
    offset = (p["page"] - 1) * PAIRS_PER_PAGE
    sides = []
    problems: list[str] = []
    for name, f in zip((a, b), files):
        steps = f.step_page(offset, PAIRS_PER_PAGE)
        step_list, event_problems = step_views(f, steps, board_assets(name, f.run_dir))
        sides.append(step_list)
        problems += [f"{name}: {x}" for x in f.problems() + steps.problems + event_problems]
    text_only = set(text_differs(*digests))
    thought_apart = set(reasoning_differs(*digests))
    rows: list[dict[str, Any]] = []
    for i in range(offset, min(positions, offset + PAIRS_PER_PAGE)):
        left = sides[0][i - offset] if i - offset < len(sides[0]) else None
        right = sides[1][i - offset] if i - offset < len(sides[1]) else None
        diff = reasoning_diff(_reasoning(left), _reasoning(right)) if i in thought_apart and left and right else None
        rows.append({"position": i + 1, "a": left, "b": right, "diverged": bool(divergence and divergence.position == i),
                     "after": bool(divergence and i > divergence.position), "text_only": i in text_only,
                     "reasoning_diff": diff})
    outcomes = [_outcome(board.index.get(a)), _outcome(board.index.get(b))]
    metrics = metric_deltas({**outcomes[0], **run_metrics(views[0].data, len(digests[0]))},
                            {**outcomes[1], **run_metrics(views[1].data, len(digests[1]))}, ["success", "score", *RUN_METRICS])
    specs = [views[0].data.get("run_spec") or {}, views[1].data.get("run_spec") or {}]
    exps = [views[0].data.get("experiment_spec") or {}, views[1].data.get("experiment_spec") or {}]
    name_a, name_b, _ = side_names(specs[0], specs[1])
    return page(request, "compare.html.j2", a=a, b=b, ready=True,
                oa=run_overview(views[0], board.index.get(a)), ob=run_overview(views[1], board.index.get(b)),
                config=config_diff(views[0].data, views[1].data), metrics=metrics, divergence=divergence,
                rows=rows, pager=p, problems=problems, text_only=len(text_only),
                repro=reproducibility(views[0].data, views[1].data), name_a=name_a, name_b=name_b,
                run_tree=build_tree(specs[0], specs[1], compare=True), exp_tree=build_tree(exps[0], exps[1], compare=True))


def _reasoning(sv: Any) -> str | None:
    response = sv.step.get("model_response") if isinstance(sv.step.get("model_response"), dict) else {}
    return response.get("reasoning") if isinstance(response.get("reasoning"), str) else None


def _outcome(row: dict[str, Any] | None) -> dict[str, Any]:
    """Success and score of a run as its results row says (None when no results file names it)."""
    success = row.get("success") if row else None
    return {"success": None if success is None else bool(success), "score": row.get("score") if row else None}

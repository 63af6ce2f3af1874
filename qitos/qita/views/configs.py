"""Configurations (the board's home), one configuration's task runs, and per-benchmark summaries.

The home page lists configurations grouped by benchmark: a headline per benchmark (never one
number across benchmarks), then one line per configuration that expands to its task runs.
The benchmark pages hold the plots; `?c=<id>` picks the configurations the per-configuration
plots show (default: the best few).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..board import Board, NotFound
from ..configs import Configuration, run_name
from ..plots import PLOTLY_MISSING, benchmark_figures, pick, plotly_js_path, success_bars
from ..render import render
from .common import board_of, int_param, page
from .run import pager

ROWS_PER_PAGE = 100
LINES_PER_BENCHMARK = 25  # on the unfiltered home page; picking the benchmark shows all its lines
EXPANDED_ROWS = 25
SORTS = {
    "success": lambda c: (c.success_rate if c.success_rate is not None else -1),
    "cost": lambda c: (c.metrics.get("total_cost") if c.metrics.get("total_cost") is not None else -1),
    "tokens": lambda c: c.metrics.get("total_tokens") or 0,
    "runs": lambda c: c.metrics.get("total") or 0,
    "model": lambda c: c.model or "",
    "recipe": lambda c: c.recipe or "",
}


def headline(confs: list[Configuration]) -> dict[str, Any]:
    """One benchmark's totals: counts and the best configuration, never a pooled success rate."""
    rated = [c for c in confs if c.success_rate is not None and not c.is_oracle]
    best = max(rated, key=lambda c: c.success_rate or 0, default=None)
    return {"configs": len(confs), "runs": sum(c.metrics.get("total") or 0 for c in confs),
            "tokens": sum(c.metrics.get("total_tokens") or 0 for c in confs),
            "official": sum(1 for c in confs if c.official == "yes"),
            "oracle": sum(1 for c in confs if c.is_oracle), "best": best}


def _filtered(board: Board, request: Request) -> tuple[dict[str, list[Configuration]], dict[str, str]]:
    params = {k: (request.query_params.get(k) or "").strip()[:200] for k in ("benchmark", "official", "q", "sort")}
    groups = board.configs.benchmarks()
    out: dict[str, list[Configuration]] = {}
    words = params["q"].lower().split()[:8]
    for bench, confs in groups.items():
        if params["benchmark"] and bench != params["benchmark"]:
            continue
        kept = [c for c in confs if (not params["official"] or c.official == params["official"]) and all(
            w in " ".join(str(x or "") for x in (c.name, c.source_label, c.split, c.subset, c.recipe, c.model,
                                                 c.run_spec_ref)).lower() for w in words)]
        if params["sort"] in SORTS:
            kept.sort(key=SORTS[params["sort"]], reverse=params["sort"] not in ("model", "recipe"))
        if kept:
            out[bench] = kept
    return out, params


def empty_state(board: Board) -> dict[str, Any]:
    """What to tell a reader whose board shows nothing: where runs are, or how to make some."""
    logdir = board.config.logdir
    hints: list[dict[str, str]] = []
    try:
        children = [p for p in logdir.iterdir() if p.is_dir() and not p.name.startswith(".")][:500]
    except OSError:
        children = []
    for child in children:
        try:
            found = sum(1 for g in child.iterdir() if (g / "manifest.json").is_file())
        except OSError:
            continue
        if found:
            hints.append({"kind": "below", "path": str(child), "count": str(found)})
    if (logdir / "manifest.json").is_file() or (logdir / "steps.jsonl").is_file():
        hints.append({"kind": "run", "path": str(logdir), "count": "1"})
    return {"hints": hints[:5], "logdir": str(logdir)}


def configs_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    board.refresh()
    groups, params = _filtered(board, request)
    heads = {bench: headline(confs) for bench, confs in groups.items()}
    limit = 10**6 if params["benchmark"] else LINES_PER_BENCHMARK
    shown = {bench: confs[:limit] for bench, confs in groups.items()}
    total = len(board.configs.all())
    empty = empty_state(board) if board.index.count() == 0 and not board.config.results else None
    return page(request, "configs.html.j2", groups=groups, shown=shown, heads=heads, params=params, total_configs=total,
                benchmarks=sorted(board.configs.benchmarks()), empty=empty, total_runs=board.index.count(),
                result_issues=board.index.result_issues[:20], known_run=board.known_run)


def _config(board: Board, ident: str) -> Configuration:
    conf = board.configs.get(ident)
    if conf is None:
        raise NotFound(f"no configuration '{ident}' (the board's runs or results files changed?)")
    return conf


def config_runs(request: Request) -> HTMLResponse:
    """The task runs of one configuration, as a fragment the home page inserts when a line expands."""
    board = board_of(request)
    conf = _config(board, request.path_params["ident"])
    html = render("_config_runs.html.j2", conf=conf, rows=conf.rows[:EXPANDED_ROWS], more=len(conf.rows) - EXPANDED_ROWS,
                  known_run=board.known_run, run_name=run_name, export=False)
    return HTMLResponse(html)


def config_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    conf = _config(board, request.path_params["ident"])
    rows = sorted(conf.rows, key=lambda r: (str(r.get("task_id")), int(r.get("trial") or 0)))
    p = pager(len(rows), ROWS_PER_PAGE, int_param(request, "page", 1))
    shown = rows[(p["page"] - 1) * ROWS_PER_PAGE: p["page"] * ROWS_PER_PAGE]
    return page(request, "config.html.j2", conf=conf, rows=shown, pager=p, known_run=board.known_run,
                run_name=run_name)


def benchmarks_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    board.refresh()
    groups = board.configs.benchmarks()
    heads = {bench: headline(confs) for bench, confs in groups.items()}
    best = [c for confs in groups.values() for c in pick([c for c in confs if not c.is_oracle], [], 5)]
    figure = success_bars(best, "Best configurations of each benchmark (95% interval)",
                          label=lambda c: f"{c.benchmark} · {c.name}") if best else None
    return page(request, "benchmarks.html.j2", groups=groups, heads=heads,
                figures=[{"id": "per-benchmark", "figure": figure}] if figure else [],
                plotly=plotly_js_path() is not None, plotly_missing=PLOTLY_MISSING)


def benchmark_context(board: Board, name: str, chosen: list[str]) -> dict[str, Any]:
    confs = board.configs.benchmarks().get(name)
    if not confs:
        raise NotFound(f"no configurations of benchmark '{name}'")
    shown = pick(confs, chosen)
    return {"name": name, "confs": confs, "shown": shown, "head": headline(confs),
            "figures": benchmark_figures(confs, shown), "plotly": plotly_js_path() is not None,
            "plotly_missing": PLOTLY_MISSING}


def benchmark_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    board.refresh()
    ctx = benchmark_context(board, request.path_params["name"], request.query_params.getlist("c"))
    return page(request, "benchmark.html.j2", **ctx)


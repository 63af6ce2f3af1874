"""Experiment page: results files or configurations — metrics, the task × trial grid, A/B paired comparison.

Only files given to `qita board --results` can be opened (by position, `?f=0&f=1`): the
board never reads a path that comes from a request. Configurations (`?c=<id>&c=<id>`, ticked on
the home page) compare two RunSpecs even when they share one results file.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse

from typing import Any

from ..diff import first_trace
from ..paired import compare_paired
from ..resultsets import ResultSet
from ..spectree import build_tree, side_names
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


def _configuration_sets(board: Any, request: Request) -> list[ResultSet]:
    """The configurations asked for by id, as result sets named by their configuration."""
    sets = []
    for ident in request.query_params.getlist("c")[:4]:
        conf = board.configs.get(ident.strip())
        if conf is not None and all(s.name != conf.id for s in sets):
            sets.append(ResultSet(conf.source or Path(conf.id), conf.rows, [], name=conf.id, title=conf.name))
    return sets


def experiment_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    files = board.config.results
    sets = _configuration_sets(board, request)
    selected = [] if sets else _selected(request, len(files))
    sets = sets or [board.result_set(n) for n in selected]
    base = "".join(f"c={s.name}&" for s in sets if s.name) or "".join(f"f={n}&" for n in selected)
    grid_page = int_param(request, "gpage", 1)
    grids = []
    for rs in sets:
        rows = rs.grid()
        p = pager(len(rows), TASKS_PER_PAGE, grid_page)
        grids.append({"rows": rows[(p["page"] - 1) * TASKS_PER_PAGE: p["page"] * TASKS_PER_PAGE], "pager": p})
    sides = [side_info(rs, _trace_manifest(board, rs)) for rs in sets]
    comparison = compare_sides(sides, sets) if len(sets) == 2 else None
    paired = comparison["paired"] if comparison else None
    discordant = [p for p in paired.pairs if p.outcome in ("only_a", "only_b")][:200] if paired else []
    board.refresh()
    return page(request, "experiment.html.j2", files=files, selected=selected, sets=sets, grids=grids,
                paired=paired, discordant=discordant, known_run=board.known_run, sides=sides, comparison=comparison,
                grid_base="?" + base + "gpage=",
                run_name=lambda path: Path(path).name if isinstance(path, str) and path else None)


def _values(rows: list[dict[str, Any]], key: str) -> list[str]:
    return sorted({str(v) for v in (r.get(key) or (r.get("metadata") or {}).get(key) for r in rows) if v})


def _trace_manifest(board: Any, rs: ResultSet) -> dict[str, Any]:
    """The manifest of one of the file's traces: through the board's logdir, else as the rows' paths say."""
    for row in rs.rows[:200]:
        ref = row.get("trace_run_dir")
        name = Path(ref).name if isinstance(ref, str) and ref else None
        if name and board.known_run(name):
            data = board.run(name).manifest().data
            if data:
                return data
    return first_trace(rs.rows, rs.path) or {}


def side_info(rs: ResultSet, manifest: dict[str, Any]) -> dict[str, Any]:
    """What one results file was: benchmark, recipe, model, official or not (from one of its traces)."""
    spec = manifest.get("run_spec") if isinstance(manifest.get("run_spec"), dict) else {}
    recipes = _values(rs.rows, "recipe") or ([str(spec["metadata"]["recipe"])] if isinstance(spec.get("metadata"), dict)
                                             and spec["metadata"].get("recipe") else [])
    checks = {c.get("check"): c.get("passed") for c in manifest.get("official_checks") or [] if isinstance(c, dict)}
    oracle = any("oracle" in r for r in recipes) or checks.get("agent_unaided") is False or (
        isinstance(spec.get("metadata"), dict) and spec["metadata"].get("recipe_official") is False)
    return {"label": rs.label, "benchmarks": _values(rs.rows, "benchmark"), "recipes": recipes,
            "models": _values(rs.rows, "model"), "spec": spec, "has_trace": bool(manifest),
            "official": manifest.get("official_run") if manifest else None, "oracle": oracle}


def compare_sides(sides: list[dict[str, Any]], sets: list[ResultSet]) -> dict[str, Any]:
    """Names for A and B from what differs, warnings, and the paired test when it means something."""
    a, b = sides
    name_a, name_b, diff = side_names(a["spec"], b["spec"])
    if not name_a:  # no traces: name by what the rows say
        for key in ("recipes", "models", "benchmarks"):
            if a[key] != b[key]:
                name_a, name_b = f"{key[:-1]}={', '.join(a[key]) or '?'}", f"{key[:-1]}={', '.join(b[key]) or '?'}"
                break
    warnings = []
    for side, info in (("A", a), ("B", b)):
        if info["oracle"]:
            warnings.append(f"{side} ({info['label']}) is an oracle: it reads gold answers, so it validates the "
                            "benchmark and is not a baseline to beat")
        elif info["official"] is False:
            warnings.append(f"{side} ({info['label']}) is not an official run: see the official checks of its traces")
        elif info["official"] is None:
            warnings.append(f"{side} ({info['label']}): no trace found, so whether it is official is unknown")
    blocked = None
    if a["benchmarks"] != b["benchmarks"]:
        blocked = (f"A is {', '.join(a['benchmarks']) or '?'} and B is {', '.join(b['benchmarks']) or '?'}: different "
                   "benchmarks share no tasks, so no paired test is shown")
    paired = compare_paired(sets[0].rows, sets[1].rows)
    if blocked is None and paired.shared_tasks == 0:
        blocked = "A and B share no scored task, so no paired test is shown"
    return {"name_a": name_a, "name_b": name_b, "diff_count": len(diff), "warnings": warnings, "blocked": blocked,
            "paired": None if blocked else paired,
            "tree": build_tree(a["spec"], b["spec"], compare=True) if a["spec"] and b["spec"] else []}

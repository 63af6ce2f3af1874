"""Run page: overview, specs, official checks, the paginated step timeline, events, raw manifest.

`step_views` and `run_overview` are shared with the replay page and the offline export, so
a step looks the same everywhere; only where screenshots come from differs (`AssetSource`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..conversation import run_conversation
from ..diff import flatten
from ..spectree import build_tree
from ..runtrace import ManifestView, Page, RunFiles
from ..security import safe_child
from ..tracefile import LineProblem
from .common import board_of, int_param, page

STEPS_PER_PAGE = 25
EVENTS_PER_PAGE = 100

AssetSource = Callable[[str, str], "str | None"]  # (relative path, mime type) -> URL or None


@dataclass
class StepView:
    step: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    model_input: dict[str, Any] | None = None
    shots: list[dict[str, Any]] = field(default_factory=list)

    @property
    def step_id(self) -> Any:
        return self.step.get("step_id")

    @property
    def label(self) -> str:
        decision = self.step.get("decision") if isinstance(self.step.get("decision"), dict) else {}
        if decision.get("mode") == "final":
            return "final answer"
        names = [a.get("name") for a in decision.get("actions") or [] if isinstance(a, dict)]
        parser = self.step.get("parser") if isinstance(self.step.get("parser"), dict) else {}
        fallback = "unparsed output" if parser.get("ok") is False else "no decision"
        return ", ".join(str(n) for n in names) or str(decision.get("mode") or fallback)

    @property
    def failed(self) -> bool:
        parser = self.step.get("parser") if isinstance(self.step.get("parser"), dict) else {}
        tools = self.step.get("tool_invocations") or []
        return parser.get("ok") is False or any(isinstance(t, dict) and t.get("status") == "error" for t in tools)


def board_assets(name: str, run_dir: Path) -> AssetSource:
    def source(relative: str, _mime: str) -> str | None:
        if safe_child(run_dir, relative) is None:
            return None
        return f"/runs/{quote(name)}/files/{quote(relative)}"
    return source


def step_views(files: RunFiles, steps: Page, assets: AssetSource) -> tuple[list[StepView], list[LineProblem]]:
    ids = {s.get("step_id") for s in steps.items if isinstance(s.get("step_id"), int)}
    events, problems = files.events_for_steps(ids) if ids else ({}, [])
    views = []
    for rec in steps.items:
        sid = rec.get("step_id")
        own = events.get(sid, []) if isinstance(sid, int) else []
        request = next((e for e in own if e.get("kind") == "model_request"), None)
        shots = []
        for asset in rec.get("visual_assets") or []:
            if isinstance(asset, dict) and isinstance(asset.get("path"), str):
                mime = str(asset.get("mime_type") or "image/png")
                shots.append({"kind": asset.get("kind", "screenshot"), "path": asset["path"],
                              "src": assets(asset["path"], mime)})
        views.append(StepView(rec, own, request.get("payload") if request else None, shots))
    return views, problems


def run_overview(view: ManifestView, index_row: dict[str, Any] | None) -> dict[str, Any]:
    m = view.data
    summary = m.get("summary") if isinstance(m.get("summary"), dict) else {}
    usage = m.get("token_usage") if isinstance(m.get("token_usage"), dict) else {}
    run_spec = m.get("run_spec") if isinstance(m.get("run_spec"), dict) else {}
    exp_spec = m.get("experiment_spec") if isinstance(m.get("experiment_spec"), dict) else {}
    return {
        "m": m, "summary": summary, "usage": usage, "final_result": summary.get("final_result"),
        "task": m.get("task") if isinstance(m.get("task"), dict) else {},
        "status": view.status, "problem": view.problem, "raw": view.raw,
        "checks": [c for c in m.get("official_checks") or [] if isinstance(c, dict)],
        "run_spec": flatten(run_spec) if run_spec else {}, "experiment_spec": flatten(exp_spec) if exp_spec else {},
        "run_spec_tree": build_tree(run_spec), "experiment_spec_tree": build_tree(exp_spec),
        **_outcome(m, index_row),
    }


def _outcome(m: dict[str, Any], index_row: dict[str, Any] | None) -> dict[str, Any]:
    """Success and score from the board's index (a results row), else from the manifest's own evaluation."""
    if index_row and index_row.get("success") is not None:
        return {"success": index_row.get("success"), "score": index_row.get("score")}
    evaluation = m.get("evaluation") if isinstance(m.get("evaluation"), dict) else {}
    success = evaluation.get("success")
    return {"success": None if success is None else (1 if success else 0), "score": evaluation.get("score")}


def pager(total: int, per_page: int, current: int) -> dict[str, int]:
    pages = max(1, -(-total // per_page))
    current = min(max(1, current), pages)
    return {"page": current, "pages": pages, "per_page": per_page, "total": total,
            "first": (current - 1) * per_page + 1 if total else 0, "last": min(total, current * per_page)}


def run_page(request: Request) -> HTMLResponse:
    board = board_of(request)
    name = request.path_params["name"]
    files = board.run(name)
    steps_pager = pager(files.steps.count, STEPS_PER_PAGE, int_param(request, "page", 1))
    events_pager = pager(files.events.count, EVENTS_PER_PAGE, int_param(request, "events_page", 1))
    steps = files.step_page((steps_pager["page"] - 1) * STEPS_PER_PAGE, STEPS_PER_PAGE)
    views, event_problems = step_views(files, steps, board_assets(name, files.run_dir))
    events = files.event_page((events_pager["page"] - 1) * EVENTS_PER_PAGE, EVENTS_PER_PAGE)
    board.refresh()
    problems = [str(p) for p in files.problems() + steps.problems + event_problems + events.problems]
    return page(request, "run.html.j2", name=name, o=run_overview(files.manifest(), board.index.get(name)),
                conv=run_conversation(files),
                steps=views, steps_pager=steps_pager, events=events.items, events_pager=events_pager,
                problems=problems, events_open=request.query_params.get("events_page") is not None)


"""`qita export` / `qit bench export --html`: one self-contained HTML file for a run.

Everything (CSS, JS, data, screenshots as data URIs) is inlined; the page makes no network
requests and opens from file://. Trace text is escaped by Jinja2's autoescaping.
"""

from __future__ import annotations

import base64
import json
from importlib import resources
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from qitos.trace.reader import load_run


def _env() -> Environment:
    env = Environment(loader=PackageLoader("qitos.qita", "templates"), autoescape=select_autoescape(["html", "j2"]))
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
    return env


def _static(name: str) -> str:
    return resources.files("qitos.qita").joinpath("static", name).read_text(encoding="utf-8")


def _inline_assets(run_dir: Path, steps: list[dict]) -> None:
    root = run_dir.resolve()
    for step in steps:
        for asset in step.get("visual_assets") or []:
            path = (root / asset.get("path", "")).resolve()
            if root in path.parents and path.is_file() and path.stat().st_size < 5_000_000:
                data = base64.b64encode(path.read_bytes()).decode()
                asset["data_uri"] = f"data:{asset.get('mime_type', 'image/png')};base64,{data}"


def render_run_html(run_dir: Path) -> str:
    trace = load_run(run_dir)
    steps = [s.model_dump(mode="json") for s in trace.steps]
    _inline_assets(run_dir, steps)
    return _env().get_template("export.html.j2").render(
        manifest=trace.manifest.model_dump(mode="json"), status=trace.status, steps=steps,
        events=[e.model_dump(mode="json") for e in trace.events], issues=trace.issues, css=_static("board.css"),
    )


def export_run_html(run_dir: Path, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_run_html(Path(run_dir)), encoding="utf-8")
    return out

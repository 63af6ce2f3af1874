"""`qita export` / `qit bench export --html`: one self-contained HTML file for a run.

The file holds the same overview, steps and events as the board's run page, plus the replay
(all steps inline; `replay.js` runs in its offline mode). CSS, script and screenshots (as
data URIs) are inlined, and a Content-Security-Policy meta tag allows only those inline
pieces, by hash: the page makes no network request and opens from file://.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from qitos.results.export import write_redacted

from .render import render, static_text
from .conversation import run_conversation
from .runtrace import RunFiles
from .security import safe_child
from .views.replay import running_totals
from .views.run import AssetSource, run_overview, step_views

MAX_INLINE_ASSET = 5_000_000


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def inline_assets(run_dir: Path) -> AssetSource:
    """Asset source for the export: a data URI for each screenshot inside the run dir (size-capped)."""
    def source(relative: str, mime: str) -> str | None:
        path = safe_child(run_dir, relative)
        if path is None or path.stat().st_size > MAX_INLINE_ASSET:
            return None
        safe_mime = mime if mime.startswith("image/") and "\"" not in mime else "image/png"
        return f"data:{safe_mime};base64,{base64.b64encode(path.read_bytes()).decode()}"
    return source


def export_context(run_dir: Path) -> dict[str, Any]:
    files = RunFiles(Path(run_dir))
    files.refresh()
    view = files.manifest()
    steps = files.step_page(0, files.steps.count)
    views, event_problems = step_views(files, steps, inline_assets(files.run_dir))
    digests = files.digests()
    frames = []
    for position, sv in enumerate(views, start=1):
        totals = running_totals(digests, position)
        frames.append({"position": position, "sv": sv, "totals": totals})
    events = files.event_page(0, files.events.count)
    problems = [str(p) for p in files.problems() + steps.problems + event_problems + events.problems]
    return {"name": files.run_dir.name, "o": run_overview(view, None), "frames": frames, "events": events.items,
            "problems": problems, "conv": run_conversation(files)}


def render_run_html(run_dir: Path) -> str:
    css = static_text("board.css")
    script = static_text("replay.js")
    csp = (f"default-src 'none'; img-src data:; style-src {_csp_hash(css)}; script-src {_csp_hash(script)}; "
           "base-uri 'none'; form-action 'none'")
    return render("export.html.j2", css=css, script=script, csp=csp, export=True, **export_context(Path(run_dir)))


def render_benchmark_html(board: Any, name: str, chosen: list[str] | None = None) -> str:
    """One benchmark's summary and plots as a self-contained page: plotly.js and the figures inlined."""
    from .plots import plotly_js_path
    from .views.configs import benchmark_context

    ctx = benchmark_context(board, name, chosen or [])
    path = plotly_js_path()
    if path is None:
        raise RuntimeError("exporting plots needs the plotly package: pip install 'qitos[board]'")
    css = static_text("board.css")
    scripts = [path.read_text(encoding="utf-8"), static_text("plots.js")]
    csp = (f"default-src 'none'; img-src data:; style-src {_csp_hash(css)}; "
           f"script-src {' '.join(_csp_hash(s) for s in scripts)}; base-uri 'none'; form-action 'none'")
    return render("benchmark.html.j2", css=css, scripts=scripts, csp=csp, export=True,
                  logdir=str(board.config.logdir), has_results=bool(board.config.results), path="", **ctx)


def export_benchmark_html(board: Any, name: str, out: Path) -> Path:
    """`qita export --benchmark`: the page, with secret values scrubbed as in every export."""
    return write_redacted(Path(out), render_benchmark_html(board, name))


def export_run_html(run_dir: Path, out: Path) -> Path:
    """`qita export` and `qit bench export --html`: the run's page, with secret values scrubbed."""
    return write_redacted(Path(out), render_run_html(Path(run_dir)))

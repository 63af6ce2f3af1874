"""Plot figures as Plotly JSON: success against cost and tokens, bars, distributions, pass^k.

The board renders them in the browser with the plotly.js that the `plotly` Python package
ships (served by the board from site-packages, inlined in exports: no CDN, nothing vendored
into this repository). Figures are plain dicts built from `Configuration`s, so a page costs
no plotting work on the server and the same figure goes into the board and the export.
Intervals are the 95% Wilson intervals `summarize` reports; the sign of every difference
elsewhere is B − A.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

from qitos.benchmark.metrics import summarize

from .configs import Configuration

BREAKDOWN_KEYS = ("level", "domain", "difficulty", "category")
BOX_SAMPLE = 2000  # values per box beyond which a box shows a deterministic sample
COLORS = ["#3538cd", "#e04f16", "#099250", "#c11574", "#0086c9", "#ca8504", "#6938ef", "#475467"]


@lru_cache(maxsize=1)
def plotly_js_path() -> Path | None:
    """plotly.min.js from the installed `plotly` package, found without importing it (slow)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        path = Path(base) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path
    return None


PLOTLY_MISSING = "plots need the plotly package: pip install 'qitos[board]' (or pip install plotly), then restart"


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    layout = {"title": {"text": title, "font": {"size": 14}, "x": 0, "xanchor": "left"},
              "xaxis": {"title": {"text": x_title}, "zeroline": False, "automargin": True},
              "yaxis": {"title": {"text": y_title}, "zeroline": False, "automargin": True},
              "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "height": 380, "hovermode": "closest",
              "paper_bgcolor": "#fff", "plot_bgcolor": "#fafbfc", "font": {"family": "system-ui, sans-serif", "size": 12},
              "legend": {"orientation": "h", "y": -0.25}}
    layout.update(extra)
    return layout


def _rate_axis(axis: dict[str, Any]) -> dict[str, Any]:
    return {**axis, "range": [-0.02, 1.02], "tickformat": ".0%"}


def _error(rates: list[float | None], intervals: list[list[float] | None]) -> dict[str, Any]:
    upper = [(ci[1] - r) if ci and r is not None else 0 for r, ci in zip(rates, intervals)]
    lower = [(r - ci[0]) if ci and r is not None else 0 for r, ci in zip(rates, intervals)]
    return {"type": "data", "symmetric": False, "array": upper, "arrayminus": lower, "thickness": 1.2, "width": 3}


def pareto_frontier(points: Iterable[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Points no other point beats on both axes: lower x (cost, tokens) and higher y (success).

    Oracles are left out by the caller: they read gold, so they bound nothing a method can reach."""
    frontier: list[tuple[float, float, str]] = []
    for x, y, ident in sorted(points, key=lambda p: (p[0], -p[1])):
        if not frontier or y > frontier[-1][1]:
            frontier.append((x, y, ident))
    return frontier


def _plain(text: Any) -> str:
    """Trace-derived text (model, recipe, file names) as plain text: plotly reads <tags> and %{fields} in labels."""
    return str(text).replace("<", "‹").replace(">", "›").replace("%{", "%\u200b{")


def _hover(conf: Configuration) -> str:
    ci = conf.metrics.get("success_ci95")
    interval = f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else ""
    rate = conf.success_rate
    return (f"{_plain(conf.name)}<br>{_plain(conf.source_label)}<br>success {100 * rate:.1f}%{interval}"
            if rate is not None else _plain(conf.name))


def success_against(confs: list[Configuration], x_of: Callable[[Configuration], float | None], x_title: str,
                    title: str, log_x: bool = False) -> dict[str, Any]:
    """Success rate (with 95% interval) of each configuration against a per-run cost, and the Pareto frontier."""
    usable = [c for c in confs if c.success_rate is not None and x_of(c) is not None]
    left_out = len(confs) - len(usable)
    xs = [float(x_of(c)) for c in usable]  # type: ignore[arg-type]
    ys = [float(c.success_rate) for c in usable]  # type: ignore[arg-type]
    front = pareto_frontier((x, y, c.id) for x, y, c in zip(xs, ys, usable) if not c.is_oracle)
    kinds = [("official", "#3538cd", "diamond", lambda c: not c.is_oracle and c.official == "yes"),
             ("not official", "#3538cd", "circle", lambda c: not c.is_oracle and c.official != "yes"),
             ("oracle (reads gold)", "#b42318", "x", lambda c: c.is_oracle)]
    traces = []
    for label, color, symbol, member in kinds:
        idx = [i for i, c in enumerate(usable) if member(c)]
        if not idx:
            continue
        kx, ky = [xs[i] for i in idx], [ys[i] for i in idx]
        traces.append({"type": "scatter", "mode": "markers", "name": label, "x": kx, "y": ky,
                       "error_y": _error(ky, [usable[i].metrics.get("success_ci95") for i in idx]),
                       "customdata": [usable[i].id for i in idx], "hovertext": [_hover(usable[i]) for i in idx],
                       "hovertemplate": "%{hovertext}<br>" + x_title + " %{x}<extra></extra>",
                       "marker": {"size": 9, "color": color, "symbol": symbol}})
    traces.append({"type": "scatter", "mode": "lines", "name": "Pareto frontier", "x": [p[0] for p in front],
                   "y": [p[1] for p in front], "line": {"shape": "hv", "color": "#099250", "dash": "dot"},
                   "hoverinfo": "skip"})
    note = f" ({left_out} without {x_title.split(' (')[0]} left out)" if left_out else ""
    layout = _layout(title + note, x_title, "success rate")
    layout["yaxis"] = _rate_axis(layout["yaxis"])
    if log_x:
        layout["xaxis"]["type"] = "log"
    return {"data": traces, "layout": layout, "points": len(usable), "frontier": [p[2] for p in front]}


def success_bars(confs: list[Configuration], title: str, label: Callable[[Configuration], str] | None = None
                 ) -> dict[str, Any]:
    """Horizontal bars of success rate with 95% intervals, best first."""
    usable = sorted([c for c in confs if c.success_rate is not None], key=lambda c: c.success_rate or 0)
    label = label or (lambda c: c.name)
    rates = [float(c.success_rate) for c in usable]  # type: ignore[arg-type]
    names = [_plain(label(c)) for c in usable]
    trace = {"type": "bar", "orientation": "h", "x": rates, "y": names, "customdata": [c.id for c in usable],
             "error_x": _error(rates, [c.metrics.get("success_ci95") for c in usable]),
             "hovertext": [_hover(c) for c in usable], "hovertemplate": "%{hovertext}<extra></extra>",
             "marker": {"color": ["#fda29b" if c.is_oracle else "#8098f9" for c in usable]}}
    layout = _layout(title, "success rate", "", height=max(220, 70 + 24 * len(usable)))
    layout["xaxis"] = _rate_axis(layout["xaxis"])
    layout["yaxis"].update({"type": "category", "automargin": True})
    layout["margin"]["l"] = 10
    return {"data": [trace], "layout": layout, "points": len(usable)}


def breakdown_key(confs: list[Configuration]) -> str | None:
    """The first per-row field that splits these configurations' tasks in two or more (GAIA level, domain...)."""
    for key in (*BREAKDOWN_KEYS, "subset"):
        values = {str(_row_value(r, key)) for c in confs for r in c.rows if _row_value(r, key) is not None}
        if len(values) > 1:
            return key
    return None


def _row_value(row: dict[str, Any], key: str) -> Any:
    return row.get(key) if key in row else (row.get("metadata") or {}).get(key)


def breakdown_bars(confs: list[Configuration], key: str, title: str) -> dict[str, Any]:
    """Grouped bars: success per level/domain value, one colour per configuration, with intervals."""
    values = sorted({_plain(_row_value(r, key)) for c in confs for r in c.rows if _row_value(r, key) is not None})
    traces = []
    for n, conf in enumerate(confs):
        rates, cis, counts = [], [], []
        for value in values:
            rows = [r for r in conf.rows if _row_value(r, key) is not None and _plain(_row_value(r, key)) == value]
            m = summarize(rows) if rows else {}
            rates.append(m.get("success_rate"))
            cis.append(m.get("success_ci95"))
            counts.append(m.get("total") or 0)
        traces.append({"type": "bar", "name": _plain(conf.name), "x": values, "y": rates, "customdata": counts,  # None: no bar
                       "error_y": _error(rates, cis), "marker": {"color": COLORS[n % len(COLORS)]},
                       "hovertemplate": f"{_plain(conf.name)}<br>{key} %{{x}}: %{{y:.1%}} of %{{customdata}} runs<extra></extra>"})
    layout = _layout(title, key, "success rate", barmode="group")
    layout["yaxis"] = _rate_axis(layout["yaxis"])
    return {"data": traces, "layout": layout, "points": len(values)}


def _sample(values: list[float]) -> list[float]:
    if len(values) <= BOX_SAMPLE:
        return values
    step = len(values) / BOX_SAMPLE
    return [values[int(i * step)] for i in range(BOX_SAMPLE)]


def distribution(confs: list[Configuration], field: str, title: str, y_title: str) -> dict[str, Any]:
    """One box per configuration over its task runs (steps, latency or tokens)."""
    def value(row: dict[str, Any]) -> float | None:
        if field == "tokens":
            usage = row.get("token_usage") or {}
            v = usage.get("total_tokens") if isinstance(usage, dict) else None
        else:
            v = row.get(field)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    traces = []
    for n, conf in enumerate(confs):
        ys = _sample(sorted(v for v in (value(r) for r in conf.rows) if v is not None))
        traces.append({"type": "box", "name": _plain(conf.name), "y": ys, "boxpoints": "outliers",
                       "marker": {"color": COLORS[n % len(COLORS)]}, "line": {"width": 1.2}})
    layout = _layout(title, "", y_title, showlegend=True)
    layout["xaxis"]["showticklabels"] = False
    return {"data": traces, "layout": layout, "points": len(traces)}


def pass_k_curves(confs: list[Configuration], title: str) -> dict[str, Any]:
    """pass^k against k for each configuration with more than one trial."""
    traces = []
    for n, conf in enumerate(confs):
        values = {int(k): v for k, v in (conf.metrics.get("pass_hat_k") or {}).items() if v is not None}
        if len(values) < 2:
            continue
        ks = sorted(values)
        traces.append({"type": "scatter", "mode": "lines+markers", "name": _plain(conf.name), "x": ks,
                       "y": [values[k] for k in ks], "line": {"color": COLORS[n % len(COLORS)]}})
    layout = _layout(title, "k (trials that must all succeed)", "pass^k")
    layout["yaxis"] = _rate_axis(layout["yaxis"])
    layout["xaxis"]["dtick"] = 1
    return {"data": traces, "layout": layout, "points": len(traces)}


def pick(confs: list[Configuration], chosen: list[str], limit: int = 6) -> list[Configuration]:
    """The configurations the per-configuration plots show: those asked for, else the best few."""
    by_id = {c.id: c for c in confs}
    picked = [by_id[i] for i in chosen if i in by_id][:len(COLORS)]
    if picked:
        return picked
    candidates = [c for c in confs if not c.is_oracle] or confs  # oracles only when there is nothing else
    ranked = sorted(candidates, key=lambda c: (-(c.success_rate if c.success_rate is not None else -1),
                                               c.mean_cost if c.mean_cost is not None else float("inf")))
    return ranked[:limit]


def benchmark_figures(confs: list[Configuration], shown: list[Configuration]) -> list[dict[str, Any]]:
    """Every plot of one benchmark's page, in reading order: (id, caption, figure)."""
    figs = [
        {"id": "cost", "figure": success_against(confs, lambda c: c.mean_cost, "mean cost per task run (USD)",
                                                 "Success against cost")},
        {"id": "tokens", "figure": success_against(
            confs, lambda c: c.metrics.get("mean_tokens") or None, "mean tokens per task run",
            "Success against tokens")},
        {"id": "bars", "figure": success_bars(confs, "Success rate by configuration (95% interval)")},
    ]
    key = breakdown_key(shown)
    if key:
        figs.append({"id": "levels", "figure": breakdown_bars(shown, key, f"Success by {key}")})
    figs += [
        {"id": "steps", "figure": distribution(shown, "steps", "Steps per task run", "steps")},
        {"id": "latency", "figure": distribution(shown, "latency_seconds", "Time per task run", "seconds")},
        {"id": "tokens-dist", "figure": distribution(shown, "tokens", "Tokens per task run", "tokens")},
        {"id": "passk", "figure": pass_k_curves(shown, "pass^k over k")},
    ]
    return figs

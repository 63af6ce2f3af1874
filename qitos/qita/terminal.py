"""`qita diff` in the terminal: the same report as `--json`, as rich tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from .render import compact, num


def _value(value: Any) -> str:
    return "–" if value is None else compact(value, 80)


def _config_table(config: list[dict[str, Any]]) -> Table:
    table = Table(title=f"configuration differences ({len(config)})", title_justify="left")
    for col in ("where", "field", "A", "B"):
        table.add_column(col, overflow="fold")
    for d in config:
        table.add_row(d["section"], d["key"], _value(d["a"]), _value(d["b"]))
    return table


def _metrics_table(metrics: list[dict[str, Any]]) -> Table:
    table = Table(title="metrics", title_justify="left")
    table.add_column("metric")
    table.add_column("A", justify="right", overflow="fold")
    table.add_column("B", justify="right", overflow="fold")
    table.add_column("Δ (B − A)", justify="right")
    for m in metrics:
        delta = m["delta"]
        style = "" if not delta else ("green" if delta > 0 else "red")
        table.add_row(m["metric"], _value(num(m["a"]) if isinstance(m["a"], (int, float)) else m["a"]),
                      _value(num(m["b"]) if isinstance(m["b"], (int, float)) else m["b"]),
                      f"[{style}]{num(delta)}[/]" if style else ("" if delta is None else num(delta)))
    return table


def print_diff(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]A[/] {report['a']}\n[bold]B[/] {report['b']}")
    for side, problem in (report.get("problems") or {}).items():
        console.print(f"[yellow]⚠ {side.upper()}: {problem}[/]")
    for issue in report.get("issues") or []:
        console.print(f"[yellow]⚠ {issue}[/]")
    if report["config"]:
        console.print(_config_table(report["config"]))
    else:
        console.print("[green]configuration: identical[/]")
    if report["kind"] == "runs":
        div = report["first_divergence"]
        steps = report["steps"]
        if div:
            console.print(f"[bold red]first divergence[/] at step {div['step_id']} (position {div['position'] + 1}): "
                          f"{div['reason']}   [dim]steps: A {steps[0]}, B {steps[1]}[/]")
        else:
            console.print(f"[green]no divergence[/]: same decisions and observations for all {steps[0]} steps")
        if report["text_only_differences"]:
            console.print(f"[dim]model wording differs (same decision) at steps {report['text_only_differences'][:20]}[/]")
    console.print(_metrics_table(report["metrics"]))
    if report["kind"] == "results":
        p = report["paired"]
        c = p["counts"]
        console.print(f"[bold]paired by {p['unit']}[/]: {p['pairs']} pairs over {p['shared_tasks']} shared tasks "
                      f"(only in A: {p['tasks_only_in_a']}, only in B: {p['tasks_only_in_b']})")
        console.print(f"  both solved {c.get('both', 0)} · only A {c.get('only_a', 0)} · only B {c.get('only_b', 0)} · "
                      f"neither {c.get('neither', 0)}")
        if p["difference"] is not None:
            low, high = p["ci95"]
            console.print(f"  success B − A = {100 * p['difference']:+.1f} pts, 95% CI [{100 * low:+.1f}, {100 * high:+.1f}] "
                          f"(Newcombe, paired)")
        console.print(f"  McNemar p = {p['mcnemar_p']:.4f} ({p['test']})")

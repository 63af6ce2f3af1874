"""Terminal views for `qit bench`: the plan, the live progress bar, summaries and tables (rich)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

console = Console(soft_wrap=True)


def print_plan(plan) -> None:
    cfg = plan.cfg
    console.print(
        f"[bold]{cfg.benchmark}[/] split={cfg.load.split} subset={cfg.load.subset or '-'} "
        f"recipe={plan.ctx.recipe.name} model={cfg.model.model_name} executor={cfg.executor}")
    console.print(f"tasks {len(plan.tasks)} × trials {cfg.trials}: {len(plan.jobs)} to run, {plan.skipped} already done "
                  f"(resume) · RunSpec {plan.run_spec.fingerprint()} · dataset {plan.ctx.dataset_digest}")
    console.print(f"results → {plan.output}   traces → {cfg.trace_logdir}/")
    if cfg.dry_run:
        for task, trial in plan.jobs[:20]:
            console.print(f"  would run {task.id} trial {trial}")
        if len(plan.jobs) > 20:
            console.print(f"  ... and {len(plan.jobs) - 20} more")
        console.print("[yellow]dry run: nothing executed[/]")


def run_with_progress(plan):
    from qitos.benchmark.runner import execute_batch

    stats = {"ok": 0, "tokens": 0, "cost": 0.0}
    lock = threading.Lock()
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("✓ {task.fields[ok]}  tokens {task.fields[tokens]}  ${task.fields[cost]:.4f}"),
                        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console,
                        transient=False)
    with progress:
        bar = progress.add_task(plan.cfg.benchmark, total=len(plan.jobs), ok=0, tokens=0, cost=0.0)

        def on_row(row) -> None:
            with lock:
                stats["ok"] += 1 if row.success else 0
                stats["tokens"] += row.token_usage.total_tokens
                stats["cost"] += row.cost or 0.0
                progress.update(bar, advance=1, ok=stats["ok"], tokens=stats["tokens"], cost=stats["cost"])

        outcome = execute_batch(plan, on_row)
    return outcome


def print_summary(plan, outcome) -> None:
    from qitos.benchmark.metrics import summarize

    rows = [r.model_dump(mode="json") for r in outcome.rows]
    s = summarize(rows)
    if outcome.cancelled:
        console.print(f"[yellow]cancelled[/]: {len(rows)} of {len(plan.jobs)} finished and saved; "
                      "rerun the same command to resume")
    rate = f"{s['success_rate']:.3f}" if s["success_rate"] is not None else "n/a"
    console.print(f"finished {len(rows)} · successes {s['successes']}/{s['scored']} (rate {rate}) · "
                  f"tokens {s['total_tokens']} · cost {s['total_cost']}")
    console.print(f"stop reasons: {s['stop_reasons']}")
    console.print(f"results: {plan.output}   evaluate: qit bench eval --input {plan.output}")


def _plugin_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from qitos.benchmark.registry import get_adapter

    out: dict[str, Any] = {}
    for name in sorted({r.get("benchmark") for r in rows if r.get("benchmark")}):
        try:
            adapter = get_adapter(name)
        except Exception:  # noqa: BLE001 - rows of an unknown benchmark still aggregate generically
            continue
        metrics = adapter.metrics([r for r in rows if r.get("benchmark") == name])
        if metrics:
            out[name] = metrics
    return out


def evaluate_files(paths: list[Path], by: list[str]) -> dict[str, Any]:
    from qitos.benchmark.metrics import evaluate_rows
    from qitos.benchmark.results import RowIssue, iter_rows

    from .errors import UsageError

    issues: list[RowIssue] = []
    rows: list[dict[str, Any]] = []
    for path in paths:
        if not path.is_file():
            raise UsageError(f"--input {path}: no such file")
        rows.extend(iter_rows(path, issues))
    groups = evaluate_rows(rows, by, _plugin_metrics)
    return {"files": [str(p) for p in paths], "by": by, "rows": len(rows), "groups": groups,
            "issues": [str(i) for i in issues]}


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _fmt_nested(value: Any) -> str:
    if isinstance(value, dict):
        return "  ".join(f"{k}={_fmt_nested(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_fmt_nested(v) for v in value) + "]"
    return _fmt(value)


def print_eval(report: dict[str, Any]) -> None:
    for issue in report["issues"]:
        console.print(f"[yellow]skipped[/] {issue}")
    console.print(f"[bold]{report['rows']} rows[/] from {', '.join(report['files'])}")
    for g in report["groups"]:
        m = g["metrics"]
        label = "  ".join(f"{k}={v}" for k, v in g["group"].items())
        table = Table(title=label, show_header=False, title_justify="left", min_width=60)
        table.add_column("metric", style="dim")
        table.add_column("value")
        ci = m["success_ci95"]
        rate = f"{_fmt(m['success_rate'])}  95% CI [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "-"
        table.add_row("tasks / rows", f"{m['tasks']} / {m['total']}")
        table.add_row("successes", f"{m['successes']} of {m['scored']} scored")
        table.add_row("success rate", rate)
        table.add_row("mean score", _fmt(m["mean_score"]))
        for k, v in m["pass_hat_k"].items():
            table.add_row(f"pass^{k}", _fmt(v))
        table.add_row("stop reasons", ", ".join(f"{k}: {v}" for k, v in m["stop_reasons"].items()))
        table.add_row("mean steps", _fmt(m["mean_steps"], 2))
        table.add_row("tokens (total / mean)", f"{m['total_tokens']} / {_fmt(m['mean_tokens'], 1)}")
        table.add_row("cost (USD)", _fmt(m["total_cost"], 4) + (f"  ({m['cost_unknown_rows']} rows unknown)" if m["cost_unknown_rows"] else ""))
        table.add_row("mean latency (s)", _fmt(m["mean_latency_seconds"], 2))
        for bench, metrics in (g.get("benchmark_metrics") or {}).items():
            for key, value in metrics.items():
                table.add_row(f"{bench}: {key}", _fmt_nested(value))
        console.print(table)


def list_benchmarks(data_dir: Path | None) -> list[dict[str, Any]]:
    from qitos.benchmark.base import LoadOptions
    from qitos.benchmark.registry import available, get_adapter

    load = LoadOptions(**({"data_dir": data_dir} if data_dir else {}))
    out = []
    for name in sorted(available()):
        entry: dict[str, Any] = {"name": name}
        try:
            adapter = get_adapter(name)
            entry["description"] = adapter.description
            entry["splits"] = adapter.splits(load)
            reqs = adapter.requirements(load)
            entry["requirements"] = [r.model_dump() for r in reqs]
            entry["can_run"] = all(r.ok for r in reqs)
            entry["recipes"] = list(adapter.recipes())
        except Exception as exc:  # noqa: BLE001 - one broken family must not hide the others
            entry.update(can_run=False, error=f"{type(exc).__name__}: {exc}")
        out.append(entry)
    return out


def print_list(info: list[dict[str, Any]]) -> None:
    table = Table(title="benchmarks")
    for col in ("name", "splits (tasks)", "recipes", "can run here", "optional extras", "why not"):
        table.add_column(col)
    for e in info:
        splits = ", ".join(f"{k} ({v if v is not None else '?'})" for k, v in (e.get("splits") or {}).items())
        why = "; ".join(f"{r['name']}: {r['detail']}" for r in e.get("requirements", []) if not r["ok"]) or e.get("error", "")
        extras = "; ".join(f"{r['name'].replace(' (optional)', '')}: {'present' if r['present'] else 'absent'}"
                           for r in e.get("requirements", []) if r.get("present") is not None)
        table.add_row(e["name"], splits, ", ".join(e.get("recipes", [])), "yes" if e.get("can_run") else "no", extras,
                      why)
    console.print(table)


def print_trajectory(run_dir: Path) -> None:
    from qitos.trace.reader import load_run

    trace = load_run(run_dir)
    m = trace.manifest
    console.print(f"[bold]{m.run_id}[/] status={trace.status} stop={m.summary.stop_reason} steps={m.step_count} "
                  f"tokens={m.token_usage.total_tokens} official={m.official_run} replay_mode={m.replay_mode}")
    console.print(f"task: {m.task.get('id')}: {str(m.task.get('objective'))[:200]}")
    for step in trace.steps:
        console.rule(f"step {step.step_id}")
        if step.model_response:
            text = step.model_response.get("text") or ""
            console.print("model: " + text[:800], markup=False)
            for call in step.model_response.get("tool_calls") or []:
                console.print(f"tool call: {call.get('name')} {call.get('arguments')}", markup=False)
        if step.parser and not step.parser.ok:
            console.print(f"parser: {'; '.join(step.parser.diagnostics)}", markup=False)
        for inv, obs in zip(step.tool_invocations, step.observation or []):
            console.print(f"→ {inv.name}({inv.arguments}) [{inv.status}] {str(obs)[:500]}", markup=False)
    console.print(f"final result: {m.summary.final_result!r}", markup=False)
    for issue in trace.issues:
        console.print(f"[yellow]trace issue[/] {issue.file} line {issue.line}: {issue.message}")

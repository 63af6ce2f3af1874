"""Terminal views for `qit bench`: the plan, the live progress bar, summaries and tables (rich)."""

from __future__ import annotations

import json
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
    note = plan.adapter.describe_run(cfg)
    if note:
        console.print(note)
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
    from qitos.benchmark.metrics import proportion_of

    rows = [r.model_dump(mode="json") for r in outcome.rows]
    if outcome.cancelled:
        console.print(f"[yellow]cancelled[/]: {len(rows)} of {len(plan.jobs)} finished and saved; "
                      "rerun the same command to resume")
    p = proportion_of(rows, len(plan.jobs))
    tokens = sum(r.token_usage.total_tokens for r in outcome.rows)
    cost = sum(r.cost or 0.0 for r in outcome.rows)
    console.print(f"finished {len(rows)} of {len(plan.jobs)} · success {p['successes']}/{p['selected']} "
                  f"(rate {_fmt(p['rate'])}; coverage {p['scored']}/{p['selected']}, "
                  f"rate over scored {_fmt(p['scored_rate'])}) · tokens {tokens} · cost {cost:.4f}")
    reasons: dict[str, int] = {}
    for r in rows:
        reasons[r["stop_reason"]] = reasons.get(r["stop_reason"], 0) + 1
    console.print(f"stop reasons: {reasons}")
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
    from qitos.benchmark.metrics import CONFIG_FIELDS, ROW_REQUIRED, evaluate_rows, known_fields
    from qitos.benchmark.results import RowIssue, iter_rows

    from .errors import UsageError

    issues: list[RowIssue] = []
    rows: list[dict[str, Any]] = []
    for path in paths:
        if not path.is_file():
            raise UsageError(f"--input {path}: no such file")
        rows.extend(iter_rows(path, issues, required=ROW_REQUIRED))
    absent = known_fields(rows, by) if rows and by else []  # the default grouping tolerates older rows
    if absent:
        raise UsageError(f"--by {','.join(absent)}: no row has such a field or metadata key; row fields are "
                         f"{', '.join(sorted(rows[0]))}")
    notes: list[str] = []
    by = by or list(CONFIG_FIELDS)
    groups = evaluate_rows(rows, by, _plugin_metrics, notes, describe=describe_configuration)
    return {"files": [str(p) for p in paths], "by": by, "rows": len(rows), "groups": groups,
            "issues": [str(i) for i in issues] + notes}


CONFIG_KEYS = ("model_name", "base_url_host", "recipe", "temperature", "max_tokens", "max_steps", "seed",
               "prompt_protocol", "parser_name", "toolset_name", "options", "agent_code", "qitos_commit")


def describe_configuration(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The settings of a group's configuration, from the RunSpec in its first readable trace manifest."""
    from qitos.benchmark.metrics import row_description

    for row in rows[:5]:
        run_dir = row.get("trace_run_dir")
        if not run_dir:
            continue
        try:
            spec = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8")).get("run_spec") or {}
        except (OSError, ValueError):
            continue
        meta, gen, budget = spec.get("metadata") or {}, spec.get("generation") or {}, spec.get("budget") or {}
        code = spec.get("agent_code") or {}
        flat = {"model_name": spec.get("model_name"), "base_url_host": spec.get("base_url_host"),
                "recipe": meta.get("recipe"), "temperature": gen.get("temperature"),
                "max_tokens": gen.get("max_tokens"), "max_steps": budget.get("max_steps"), "seed": spec.get("seed"),
                "prompt_protocol": spec.get("prompt_protocol"), "parser_name": spec.get("parser_name"),
                "toolset_name": spec.get("toolset_name"), "options": json.dumps(meta.get("options") or {}, sort_keys=True),
                "agent_code": (code.get("sha256") or "")[:12] or None, "qitos_commit": (spec.get("git_sha") or "")[:12] or None}
        return {k: flat[k] for k in CONFIG_KEYS}
    return row_description(rows)


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


def _rate(rate: Any, ci: Any) -> str:
    return f"{_fmt(rate)}  95% CI [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "-"


def print_eval(report: dict[str, Any]) -> None:
    for issue in report["issues"]:
        console.print(f"[yellow]note[/] {issue}", markup=False)
    console.print(f"[bold]{report['rows']} rows[/] from {', '.join(report['files'])}")
    for g in report["groups"]:
        m = g["metrics"]
        label = "  ".join(f"{k}={v}" for k, v in g["group"].items())
        if g.get("label"):
            label += f"\n{g['label']}"
        table = Table(title=label, show_header=False, title_justify="left", min_width=60)
        table.add_column("metric", style="dim")
        table.add_column("value")
        table.add_row("selected", f"{m['selected_tasks']} tasks × {m['trials_requested']} trials = {m['selected']} "
                                  f"({m['total']} rows)")
        table.add_row("success rate (all selected)",
                      f"{_rate(m['success_rate'], m['success_ci95'])}   {m['successes']}/{m['selected']}")
        table.add_row("coverage (scored)", f"{_fmt(m['coverage'])}   {m['scored']}/{m['selected']}")
        table.add_row("success rate (scored only)",
                      f"{_rate(m['scored_success_rate'], m['scored_success_ci95'])}   {m['successes']}/{m['scored']}")
        if m["unscored_by_reason"]:
            table.add_row("unscored (count as failures)",
                          ", ".join(f"{k}: {v}" for k, v in m["unscored_by_reason"].items()))
        table.add_row("mean score (all / scored)", f"{_fmt(m['mean_score'])} / {_fmt(m['mean_score_scored'])}")
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
            entry["runnable"] = adapter.runnable_here(load)
        except Exception as exc:  # noqa: BLE001 - one broken family must not hide the others
            entry.update(can_run=False, error=f"{type(exc).__name__}: {exc}")
        out.append(entry)
    return out


def print_list(info: list[dict[str, Any]]) -> None:
    table = Table(title="benchmarks")
    for col in ("name", "splits (runnable here / tasks)", "recipes", "can run here", "optional extras", "why not"):
        table.add_column(col)
    for e in info:
        runnable = e.get("runnable") or {}
        splits = ", ".join(f"{k} ({runnable[k]['runnable']}/{v})" if k in runnable else f"{k} ({v if v is not None else '?'})"
                           for k, v in (e.get("splits") or {}).items())
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

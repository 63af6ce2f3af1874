"""`qit bench eval`: read results files, check each row against its trace, group rows by configuration (or
`--by`), aggregate, and print the report."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from .bench_view import console, fmt, print_notes


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


def evaluate_files(paths: list[Path], by: list[str], data_dir: Path | None = None) -> dict[str, Any]:
    """Read, check against traces, group and aggregate; a `success` that is not a JSON bool stops eval (exit 2).

    The cyclic garbage collector is paused meanwhile: rows and manifests are plain JSON, so it finds
    nothing, and its full passes over 100,000 rows (and 40,000 parsed manifests) cost seconds.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _evaluate_files(paths, by, data_dir)
    finally:
        if enabled:
            gc.enable()


def _evaluate_files(paths: list[Path], by: list[str], data_dir: Path | None = None) -> dict[str, Any]:
    from qitos.benchmark.metrics import CONFIG_FIELDS, ROW_REQUIRED, evaluate_rows, known_fields
    from qitos.results.formats import refuse_foreign_format, require_file
    from qitos.results.rows import RowIssue, iter_numbered_rows
    from qitos.results.trace_check import TraceCheck, discredit

    from .errors import UsageError

    issues: list[RowIssue] = []
    rows: list[dict[str, Any]] = []
    from qitos.results.rescore import Rescorer

    rescorer = Rescorer(data_dir)
    check = TraceCheck(rescorer)
    mismatches, examples = 0, []
    for path in paths:
        require_file(path)
        refuse_foreign_format(path)  # an export given back: name it and the command that reads it
    for path in paths:
        before, noted = len(rows), len(issues)
        for line, row in iter_numbered_rows(path, issues, required=ROW_REQUIRED, strict=True):
            problem = check.problem(row, path, line)
            if problem is not None:
                mismatches += 1
                if len(examples) < 3:
                    examples.append(f"{path}:{line} {row['task_id']} {problem}")
                if row.get("success") is True:
                    discredit(row, problem)
            rows.append(row)
        if len(rows) == before:  # nothing to count is bad input, never "0 rows" and exit 0
            raise UsageError(_no_rows(path, issues[noted:]))
    settings = [b for b in by if b in CONFIG_KEYS and not any(b in r for r in rows)]
    if settings and rows:  # `--by top_p`: a configuration setting, read from the RunSpec of each row's trace
        from qitos.benchmark.metrics import group_rows

        for group in group_rows(rows, ["run_spec_ref"]).values():
            described = describe_configuration(group, check.located.get)
            for row in group:
                for key in settings:
                    row[key] = described.get(key)
    absent = known_fields(rows, by) if rows and by else []  # the default grouping tolerates older rows
    if absent:
        raise UsageError(f"--by {','.join(absent)}: no row has such a field or metadata key; row fields are "
                         f"{', '.join(sorted(rows[0]))}")
    notes: list[str] = []
    if mismatches:
        more = f"; and {mismatches - 3} more" if mismatches > 3 else ""
        notes.append(f"{mismatches} row(s) do not match their trace: {'; '.join(examples)}{more} "
                     "(a success its trace does not back counts as a failure)")
    if rescorer.not_recomputed:  # an issue only when some could not be: the counts are in `recomputed`
        skipped = "; ".join(f"{n} not recomputed: {why}" for why, n in sorted(rescorer.not_recomputed.items()))
        notes.append(f"{rescorer.recomputed} claimed success(es) scored again from their traces"
                     + (f" ({skipped})" if skipped else ""))
    by = by or list(CONFIG_FIELDS)
    describe = lambda group: describe_configuration(group, check.located.get)  # noqa: E731
    groups = evaluate_rows(rows, by, _plugin_metrics, notes, describe=describe)
    return {"files": [str(p) for p in paths], "by": by, "rows": len(rows), "trace_mismatches": mismatches,
            "groups": groups, "issues": notes + [str(i) for i in issues],
            "recomputed": rescorer.recomputed, "not_recomputed": rescorer.not_recomputed}  # notes first: print_eval shows 20


CONFIG_KEYS = ("model_name", "base_url_host", "model_server", "recipe", "temperature", "top_p", "max_tokens",
               "reasoning_effort", "extra_body", "request_timeout", "max_retries", "think_tags", "max_steps", "seed",
               "prompt_protocol", "parser_name", "toolset_name", "options", "agent_code", "qitos_commit")
_JSON_GENERATION = ("extra_body", "think_tags")  # compared as canonical JSON text


def describe_configuration(rows: list[dict[str, Any]], locate=None) -> dict[str, Any]:
    """The settings of a group's configuration, from the RunSpec in its first readable trace manifest."""
    from qitos.benchmark.metrics import row_description
    from qitos.results.trace_check import trace_run_spec

    spec = trace_run_spec(rows[:5], locate)
    if spec is not None:
        meta, gen, budget = spec.get("metadata") or {}, spec.get("generation") or {}, spec.get("budget") or {}
        code = spec.get("agent_code") or {}
        server = spec.get("model_server") or {}
        flat = {"model_name": spec.get("model_name"), "base_url_host": spec.get("base_url_host"),
                "model_server": " ".join(str(server.get(k)) for k in ("name", "version") if server.get(k)) or None,
                "recipe": meta.get("recipe"), "max_steps": budget.get("max_steps"), "seed": spec.get("seed"),
                **{k: gen.get(k) for k in ("temperature", "top_p", "max_tokens", "reasoning_effort",
                                           "request_timeout", "max_retries")},
                **{k: json.dumps(gen[k], sort_keys=True) if gen.get(k) is not None else None for k in _JSON_GENERATION},
                "prompt_protocol": spec.get("prompt_protocol"), "parser_name": spec.get("parser_name"),
                "toolset_name": spec.get("toolset_name"), "options": json.dumps(meta.get("options") or {}, sort_keys=True),
                "agent_code": (code.get("sha256") or "")[:12] or None, "qitos_commit": (spec.get("git_sha") or "")[:12] or None}
        return {k: flat[k] for k in CONFIG_KEYS}
    return row_description(rows)


def _no_rows(path: Path, issues: list[Any]) -> str:
    """One line for a file with no result row: empty, or what its first unreadable line is."""
    fix = "give the results JSONL `qit bench run --output` writes (one row object per line)"
    if not issues:
        return f"--input {path}: the file is empty (no result rows); {fix}"
    first = issues[0]
    return (f"--input {path}: no result rows in {len(issues)} line(s) (line {first.line}: {first.message}); {fix}")


def _fmt_nested(value: Any) -> str:
    if isinstance(value, dict):
        return "  ".join(f"{k}={_fmt_nested(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_fmt_nested(v) for v in value) + "]"
    return fmt(value)


def _rate(rate: Any, ci: Any) -> str:
    return f"{fmt(rate)}  95% CI [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "-"


def _floor_row(table: Table, m: dict[str, Any], scored: bool) -> None:
    """Under a success rate, the do-nothing floor on the same rows (`qitos.benchmark.floor`), where the
    benchmark's rule gives one."""
    from qitos.benchmark.floor import NAME, floor_text

    text = floor_text(m.get("do_nothing_floor"), scored=scored)
    if text:
        table.add_row(f"  {NAME} ({'scored only' if scored else 'all selected'})", text)


def print_eval(report: dict[str, Any]) -> None:
    print_notes(report["issues"], err=False)
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
        _floor_row(table, m, scored=False)
        table.add_row("coverage (scored)", f"{fmt(m['coverage'])}   {m['scored']}/{m['selected']}")
        table.add_row("success rate (scored only)",
                      f"{_rate(m['scored_success_rate'], m['scored_success_ci95'])}   {m['successes']}/{m['scored']}")
        _floor_row(table, m, scored=True)
        if m["unscored_by_reason"]:
            table.add_row("unscored (count as failures)",
                          ", ".join(f"{k}: {v}" for k, v in m["unscored_by_reason"].items()))
        table.add_row("mean score (all / scored)", f"{fmt(m['mean_score'])} / {fmt(m['mean_score_scored'])}")
        for k, v in m["pass_hat_k"].items():
            table.add_row(f"pass^{k}", fmt(v))
        table.add_row("stop reasons", ", ".join(f"{k}: {v}" for k, v in m["stop_reasons"].items()))
        table.add_row("mean steps", fmt(m["mean_steps"], 2))
        table.add_row("tokens (total / mean)", f"{m['total_tokens']} / {fmt(m['mean_tokens'], 1)}")
        table.add_row("cost (USD)", fmt(m["total_cost"], 4) + (f"  ({m['cost_unknown_rows']} rows unknown)" if m["cost_unknown_rows"] else ""))
        table.add_row("mean latency (s)", fmt(m["mean_latency_seconds"], 2))
        for bench, metrics in (g.get("benchmark_metrics") or {}).items():
            for key, value in metrics.items():
                table.add_row(f"{bench}: {key}", _fmt_nested(value))
        console.print(table)

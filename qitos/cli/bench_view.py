"""Terminal views for `qit bench`: the plan, the live progress bar, summaries and tables (rich)."""

from __future__ import annotations

import gc
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
    executor = f"local workers={cfg.workers}" if cfg.executor == "local" else cfg.executor
    console.print(  # the model as the traces record it (`none` for a recipe that calls no model)
        f"[bold]{cfg.benchmark}[/] split={cfg.load.split} subset={cfg.load.subset or '-'} "
        f"recipe={plan.ctx.recipe.name} model={plan.run_spec.model_name} executor={executor}", markup=True)
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
    from qitos.run.runner import execute_batch

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

        outcome = execute_batch(plan, on_row, keep_rows=False)  # counted, not kept: memory flat in the tasks
    return outcome


def print_summary(plan, outcome) -> None:
    tally = outcome.tally
    if outcome.cancelled:
        import signal

        why = signal.Signals(outcome.stop_signal).name
        console.print(f"[yellow]cancelled[/] ({why}): {tally.finished} of {len(plan.jobs)} finished and saved; "
                      "rerun the same command to resume")
    p = tally.proportion(len(plan.jobs))
    console.print(f"finished {tally.finished} of {len(plan.jobs)} · success {p['successes']}/{p['selected']} "
                  f"(rate {_fmt(p['rate'])}; coverage {p['scored']}/{p['selected']}, "
                  f"rate over scored {_fmt(p['scored_rate'])}) · tokens {tally.tokens} · cost {tally.cost:.4f}")
    from qitos.benchmark.floor import NAME, floor_text

    floor = floor_text(tally.floor.summary(len(plan.jobs), 1))  # over this invocation's jobs, as the line above
    if floor:
        console.print(f"{NAME} (the same tasks, by the benchmark's rule): {floor}", markup=False)
    console.print(f"stop reasons: {dict(tally.reasons)}")
    for line in incomplete_lines(outcome):
        console.print(f"[yellow]{line}[/]")
    for line in claimed_lines(outcome):
        console.print(f"[yellow]{line}[/]")
    console.print(f"results: {plan.output}   evaluate: qit bench eval --input {plan.output}")


def incomplete_lines(outcome) -> list[str]:
    """What the run could not finish, and why: dead workers, tasks with no row, rows failed outside the agent."""
    lines = [f"died: {what}" for what in outcome.died]
    if outcome.missing:
        lines.append(f"not run: {outcome.missing} task(s) have no row")
    outside = outcome.tally.outside
    if outside:
        lines.append(f"failed outside the agent (unscored): {sum(outside.values())} row(s): "
                     + ", ".join(f"{n} {reason}" for reason, n in outside.items()))
    if outcome.missing or outside:
        lines.append("incomplete: rerun the same command to run these tasks again")
    return lines


def claimed_lines(outcome) -> list[str]:
    """Outside-the-agent failures the agent side claimed and the scoring side did not see (sides/evidence.py):
    scored as errors, not run again."""
    claimed = outcome.tally.claimed
    if not claimed:
        return []
    return [f"claimed by the agent, not seen by the scoring side (scored as errors, not run again): "
            f"{sum(claimed.values())} row(s): " + ", ".join(f"{n} {c}" for c, n in sorted(claimed.items()))]


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
    from qitos.results.rows import RowIssue, TraceCheck, discredit, iter_numbered_rows

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
    from qitos.results.rows import trace_run_spec

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


NOTES_SHOWN = 20


def print_notes(issues: list[Any], err: bool = True) -> None:
    """Lines that could not be read (file and line number each), as plain `note:` lines; after
    NOTES_SHOWN of them, how many more."""
    from rich.text import Text

    target = Console(stderr=True, soft_wrap=True) if err else console
    shown = [str(issue) for issue in issues[:NOTES_SHOWN]]
    if len(issues) > NOTES_SHOWN:
        shown.append(f"and {len(issues) - NOTES_SHOWN} more" + ("" if err else " (--json lists them all)"))
    for line in shown:  # Text, not markup: nothing in a note is read as a style
        target.print(Text.assemble(("note:", "yellow"), " ", line))


def _no_rows(path: Path, issues: list[Any]) -> str:
    """One line for a file with no result row: empty, or what its first unreadable line is."""
    fix = "give the results JSONL `qit bench run --output` writes (one row object per line)"
    if not issues:
        return f"--input {path}: the file is empty (no result rows); {fix}"
    first = issues[0]
    return (f"--input {path}: no result rows in {len(issues)} line(s) (line {first.line}: {first.message}); {fix}")


def require_run_dir(run: Path) -> None:
    """`--run` must name a run directory with a readable manifest (checked before anything is written)."""
    from qitos.trace.reader import read_manifest

    from .errors import UsageError

    if not run.exists():
        raise UsageError(f"--run {run}: no such run directory (runs are folders under --trace-logdir, "
                         "e.g. runs/<run_id>; `qita board` lists them)")
    if not (run / "manifest.json").is_file():
        raise UsageError(f"--run {run}: not a QitOS run directory (it has no manifest.json)")
    read_manifest(run)  # an unreadable manifest is one line too


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
        table.add_row("coverage (scored)", f"{_fmt(m['coverage'])}   {m['scored']}/{m['selected']}")
        table.add_row("success rate (scored only)",
                      f"{_rate(m['scored_success_rate'], m['scored_success_ci95'])}   {m['successes']}/{m['scored']}")
        _floor_row(table, m, scored=True)
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
            entry["options"] = _options_of(adapter)  # before what needs the data: listed without it too
            entry["splits"] = adapter.splits(load)
            reqs = adapter.requirements(load)
            entry["requirements"] = [r.model_dump() for r in reqs]
            entry["can_run"] = all(r.ok for r in reqs)
            recipes = adapter.recipes()
            entry["recipes"] = list(recipes)
            # which recipe is the benchmark's reference baseline as upstream runs it (True), QitOS's own (False)
            entry["recipes_upstream"] = {name: r.upstream for name, r in recipes.items()}
            entry["runnable"] = adapter.runnable_here(load)
            subsets = adapter.subset_splits(load)
            if subsets:  # splits differ per subset (Tau-Bench's domains): each subset's, and what runs here
                entry["subsets"] = {subset: {"splits": splits, "runnable": adapter.runnable_here(
                    load.model_copy(update={"subset": subset}))} for subset, splits in subsets.items()}
                entry["default_subset"] = adapter.default_subset
        except Exception as exc:  # noqa: BLE001 - one broken family must not hide the others
            entry.update(can_run=False, error=f"{type(exc).__name__}: {exc}")
        out.append(entry)
    return out


def _options_of(adapter) -> list[dict[str, Any]] | None:
    """The declared `--option` keys (name, type, default, range, help); None when the adapter declares none."""
    from qitos.benchmark.options import describe_options

    model = adapter.options_model
    return None if model is None else [o.as_dict() for o in describe_options(model)]


def _splits_text(entry: dict[str, Any]) -> str:
    """`test (115)`, or `unguided (38/40)` when only some tasks of a split can run here; per subset where the
    splits differ by subset (`retail: test (115), ...; airline: test (50)`)."""
    if entry.get("subsets"):
        return "; ".join(f"{name}: {_split_counts(s.get('splits') or {}, s.get('runnable') or {})}"
                         for name, s in entry["subsets"].items())
    return _split_counts(entry.get("splits") or {}, entry.get("runnable") or {})


def _split_counts(splits: dict[str, int | None], runnable: dict[str, Any]) -> str:
    def one(split: str, count: int | None) -> str:
        if split in runnable and runnable[split].get("runnable") != count:
            return f"{split} ({runnable[split]['runnable']}/{count})"
        return f"{split} ({count if count is not None else '?'})"

    return ", ".join(one(k, v) for k, v in splits.items())


def _missing(entry: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in entry.get("requirements", []) if not r["ok"]]


def print_list(info: list[dict[str, Any]]) -> None:
    """One short line per benchmark (fits 80 columns); `--details` and `--json` carry the rest."""
    table = Table(title="benchmarks", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("splits (tasks)", max_width=30)  # runnable/total where some cannot run here
    table.add_column("runs here", no_wrap=True)
    table.add_column("missing", max_width=24)
    for e in info:
        missing = ", ".join(r["name"] for r in _missing(e)) or ("failed to load" if e.get("error") else "")
        table.add_row(e["name"], _splits_text(e), "yes" if e.get("can_run") else "no", missing)
    console.print(table)
    console.print("why and how to fix: qit bench list --details (or --json)")


def print_details(info: list[dict[str, Any]]) -> None:
    """Everything about each benchmark: description, splits, recipes, and every requirement with its detail."""
    for e in info:
        console.rule(f"[bold]{e['name']}[/]", align="left")
        if e.get("description"):
            console.print(e["description"], markup=False)
        console.print(f"splits (tasks): {_splits_text(e) or '-'}", markup=False)
        marks = {True: " (upstream's)", False: " (QitOS's own)"}
        named = [f"{r}{marks.get((e.get('recipes_upstream') or {}).get(r), '')}" for r in e.get("recipes", [])]
        console.print(f"recipes: {', '.join(named) or '-'}", markup=False)
        if "options" in e:
            _print_options(e["options"])
        console.print(f"runs here: {'yes' if e.get('can_run') else 'no'}")
        if e.get("error"):
            console.print(f"  [red]failed to load[/]: {e['error']}")
        for r in e.get("requirements", []):
            mark = "[green]ok[/]     " if r["ok"] else "[red]missing[/]"
            if r.get("present") is not None:  # an optional extra: fine either way, but say whether it is here
                mark = "[green]present[/]" if r["present"] else "[yellow]absent[/] "
            console.print(f"  {mark} {r['name']}: ", end="")
            console.print(r["detail"] or "", markup=False)
        for split, r in (e.get("runnable") or {}).items():
            if r.get("reasons") and r.get("runnable"):  # only partly runnable: say which tasks cannot run and why
                console.print(f"  {split}: {r['runnable']} of {r['tasks']} tasks can run here; the others:", markup=False)
                for reason, count in r["reasons"].items():
                    console.print(f"    {count} × {reason}", markup=False)
            for recipe, limit in (r.get("recipes") or {}).items():  # a validator that cannot check some of them
                if limit.get("reasons"):
                    console.print(f"  {split}, recipe {recipe}: checks {limit['runnable']} of the {r['runnable']} "
                                  "that run here; the others:", markup=False)
                    for reason, count in limit["reasons"].items():
                        console.print(f"    {count} × {reason}", markup=False)


def _print_options(options: list[dict[str, Any]] | None) -> None:
    """`--option` keys: name, type, default, allowed values and what each does."""
    if options is None:
        console.print("options: not declared (passed to the benchmark unchecked)", markup=False)
        return
    if not options:
        console.print("options: none (this benchmark takes no --option)", markup=False)
        return
    console.print("options (--option KEY=VALUE):", markup=False)
    for o in options:
        default = "unset" if o["default"] is None else json.dumps(o["default"])
        flag = f"; also {o['flag']}" if o.get("flag") else ""
        console.print(f"  {o['name']} ({o['type']}, default {default}; {o['range']}{flag}): {o['help']}", markup=False)


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

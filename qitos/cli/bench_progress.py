"""What `qit bench run` prints: the plan, the live progress bar while tasks run, and the summary at the end."""

from __future__ import annotations

import threading

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .bench_view import console, fmt


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
                  f"(rate {fmt(p['rate'])}; coverage {p['scored']}/{p['selected']}, "
                  f"rate over scored {fmt(p['scored_rate'])}) · tokens {tally.tokens} · cost {tally.cost:.4f}")
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

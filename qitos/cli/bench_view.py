"""Terminal pieces the `qit bench` commands share (rich): the console, number formatting, notes on lines that
could not be read, the `--run` directory check and a run's trajectory (`qit bench replay`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

console = Console(soft_wrap=True)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


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

"""`qit bench run | eval | list | replay | export | import`: thin wrappers over `qitos.run`, `qitos.results` and the
benchmark families; `run`, with its many flags, is in `bench_run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from .bench_run import run
from .errors import EXIT_RUN_FAILED, UsageError, user_errors
from .options import SecretEnv, TraceLogdir, mark_secrets

bench_app = typer.Typer(help="Run, evaluate, replay and export benchmarks.", no_args_is_help=True)
bench_app.command("run")(run)


@bench_app.command("eval")
@user_errors
def eval_(
    input: Annotated[list[Path], typer.Option("--input", "-i", help="results JSONL file(s): --input a.jsonl b.jsonl")],
    by: Annotated[str, typer.Option(help="group by these row fields or metadata keys, comma-separated "
                                         "(default: one group per configuration: benchmark, split, subset, "
                                         "run_spec_ref, model, recipe), or settings of the RunSpec: temperature, "
                                         "top_p, max_tokens, reasoning_effort, extra_body, request_timeout, "
                                         "max_retries, think_tags, model_server, model_name, ...")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    data_dir: Annotated[Optional[Path], typer.Option(
        "--data-dir", help="where the benchmarks' data is, to score claimed successes again from their traces "
                           "(jsonl, GAIA, CyBench; default $QITOS_DATA_DIR or ~/.cache/qitos/data)")] = None,
) -> None:
    """Aggregate results: success over every selected task (with coverage), pass^k, benchmark metrics, cost."""
    from .bench_eval import evaluate_files, print_eval

    report = evaluate_files(input, [b.strip() for b in by.split(",") if b.strip()], data_dir)
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        print_eval(report)


@bench_app.command("list")
@user_errors
def list_(
    data_dir: Annotated[Optional[Path], typer.Option(help="data directory")] = None,
    details: Annotated[bool, typer.Option("--details", help="description, recipes and every requirement with "
                                                             "what to install or set")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="everything, as JSON")] = False,
) -> None:
    """Show each benchmark, its splits and task counts, and whether it can run here."""
    from .bench_list import list_benchmarks, print_details, print_list

    info = list_benchmarks(data_dir)
    if as_json:
        typer.echo(json.dumps(info, indent=2, default=str))
    elif details:
        print_details(info)
    else:
        print_list(info)


@bench_app.command("replay")
@user_errors
def replay(
    run: Annotated[Path, typer.Option("--run", help="a run directory")],
    reexecute: Annotated[bool, typer.Option("--reexecute", help="re-run with the recorded responses and compare")] = False,
    trace_logdir: TraceLogdir = "runs",
) -> None:
    """Show a run step by step; with --reexecute, re-run it and report the first divergence."""
    from qitos.run.replay import reexecute_run

    from .bench_view import print_trajectory, require_run_dir

    require_run_dir(run)
    print_trajectory(run)
    if reexecute:
        report = reexecute_run(run, Path(trace_logdir))
        if report.identical:
            typer.echo(f"identical: {report.steps} steps reproduced exactly (new run {report.new_run_dir})")
        else:
            typer.echo(f"diverged at step {report.first_divergence}: {report.detail} (new run {report.new_run_dir})")
            raise typer.Exit(EXIT_RUN_FAILED)


@bench_app.command("export")
@user_errors
def export(
    run: Annotated[Optional[Path], typer.Option("--run", help="a run directory")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="write one self-contained HTML page")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the run as one JSON document")] = None,
    input: Annotated[Optional[list[Path]], typer.Option("--input", "-i", help="results JSONL file(s): --input a.jsonl b.jsonl")] = None,
    format: Annotated[Optional[str], typer.Option("--format", help="csv | md | gaia-submission | tau-bench | osworld | cybench")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", help="where to write (default: stdout; osworld, cybench: a folder, required)")] = None,
    secret_env: SecretEnv = [],
) -> None:
    """Export a run (--html/--json) or results (--input --format csv|md|gaia-submission|tau-bench|osworld|cybench)."""
    mark_secrets(secret_env)
    from qitos.results import export as exp

    from .bench_view import print_notes, require_run_dir

    if run is not None:
        if not (html or json_out):
            raise UsageError("with --run give --html OUT and/or --json OUT")
        require_run_dir(run)  # before anything is written
        if html:
            from qitos.qita.export import export_run_html

            export_run_html(run, html)
            typer.echo(f"wrote {html}")
        if json_out:
            exp.export_run_json(run, json_out)
            typer.echo(f"wrote {json_out}")
        return
    if not input or not format:
        raise UsageError("give --run DIR (--html/--json) or --input FILE --format csv|md|gaia-submission|tau-bench|osworld|cybench")
    if format == "osworld":  # upstream's results folder layout, not one text
        _export_osworld(input, output)
        return
    if format == "cybench":  # upstream's logs/ layout, one JSON per task run
        _export_cybench(input, output)
        return
    issues: list = []
    text = exp.export_results(input, format, issues)
    print_notes(issues)  # on stderr: stdout is the export
    if output:
        output.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {output}")
    else:
        typer.echo(text, nl=False)


def _export_osworld(inputs: list[Path], output: Path | None) -> None:
    if output is None:
        raise UsageError("--format osworld writes upstream's results folder: give --output DIR")
    from qitos.results.formats import require_file

    for path in inputs:
        require_file(path)
    from qitos.benchmark.osworld.interop import export_results

    counts = export_results(inputs, output)
    typer.echo(f"wrote {counts['tasks']} task folder(s) ({counts['scored']} with result.txt) under {output}; "
               f"{counts['skipped']} row(s) that never ran have none, as upstream")


def _export_cybench(inputs: list[Path], output: Path | None) -> None:
    if output is None:
        raise UsageError("--format cybench writes upstream's logs folder: give --output DIR")
    from qitos.results.formats import require_file

    for path in inputs:
        require_file(path)
    from qitos.benchmark.base import default_data_dir
    from qitos.benchmark.cybench.interop import export_results

    counts = export_results(inputs, output, default_data_dir() / "cybench")
    typer.echo(f"wrote {counts['logs']} run log(s) under {output} (upstream's logs/ layout); "
               f"{counts['skipped']} row(s) that never ran or were never scored have none, as upstream")


@bench_app.command("import")
@user_errors
def import_(
    file: Annotated[Path, typer.Argument(help="a results file (tau-bench) or folder (osworld, cybench) of another harness")],
    format: Annotated[str, typer.Option("--format", help="tau-bench (upstream run.py's results JSON) | osworld (upstream's results folder) | cybench (upstream's logs folder)")] = "tau-bench",
    subset: Annotated[str, typer.Option(help="tau-bench domain of the file: retail | airline")] = "retail",
    split: Annotated[Optional[str], typer.Option(help="split of the file's tasks (default tau-bench: test, osworld: test_all; cybench: read from each log)")] = None,
    output: Annotated[Optional[Path], typer.Option(help="results JSONL to append to (default results/imported_<file>.jsonl)")] = None,
    trace_logdir: TraceLogdir = "runs",
) -> None:
    """Turn another harness's results into rows and traces that `qit bench eval` and qita show."""
    if format not in ("tau-bench", "osworld", "cybench"):
        raise UsageError(f"--format {format}: tau-bench, osworld and cybench can be imported")
    from .paths import check_output_file, removed_if_failed

    out = output or Path("results") / f"imported_{file.stem}.jsonl"
    check_output_file(out, "--output" if output else "--output (default)")
    with removed_if_failed(Path(trace_logdir), out.parent):  # a failed import leaves no empty runs/ behind
        _import(file, format, subset, split, out, Path(trace_logdir))


def _import(file: Path, format: str, subset: str, split: str | None, out: Path, trace_logdir: Path) -> None:
    from qitos.trace.writer import ensure_writable_dir

    if format == "osworld":
        from qitos.benchmark.osworld.interop import import_results as import_osworld

        ensure_writable_dir(trace_logdir)
        rows = import_osworld(file, split or "test_all", out, trace_logdir)
        typer.echo(f"imported {len(rows)} task folder(s) of {file} → {out} (traces in {trace_logdir}/)")
        return
    if format == "cybench":
        from qitos.benchmark.cybench.interop import import_results as import_cybench

        ensure_writable_dir(trace_logdir)
        rows = import_cybench(file, out, trace_logdir)
        typer.echo(f"imported {len(rows)} run log(s) of {file} → {out} (traces in {trace_logdir}/)")
        return
    from qitos.benchmark.tau_bench.interop import import_results

    ensure_writable_dir(trace_logdir)
    rows = import_results(file, subset, split or "test", out, trace_logdir)
    typer.echo(f"imported {len(rows)} trajectories of {file} → {out} (traces in {trace_logdir}/)")

"""`qita`: the board to browse, replay, compare and export runs. Heavy imports stay inside commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import fail, user_errors

app = typer.Typer(help="qita: browse, replay, compare and export QitOS runs.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)

Host = Annotated[str, typer.Option(help="address to bind; anything but loopback needs a token")]
Port = Annotated[int, typer.Option(help="port to listen on (0 = any free port)")]
Token = Annotated[Optional[str], typer.Option(help="access token every request must carry (generated when a "
                                                   "non-loopback --host is given without one)")]
Results = Annotated[Optional[list[Path]], typer.Option("--results", help="results JSONL file for the Experiment page "
                                                                         "and run success (repeatable)")]
OpenBrowser = Annotated[bool, typer.Option("--open", help="open the page in a web browser")]
SecretEnvs = Annotated[Optional[list[str]], typer.Option(
    "--secret-env", metavar="NAME",
    help="environment variable whose value is a secret, redacted from every page and export (repeatable)")]
CacheDir = Annotated[Optional[Path], typer.Option(help="where the SQLite index is kept (default ~/.cache/qitos/qita)")]


def _serve(logdir: Path, results: list[Path], host: str, port: int, token: str | None, open_browser: bool,
           cache_dir: Path | None, path: str) -> None:
    from qitos.qita.config import BoardConfig, BoardConfigError, is_loopback, new_token
    from qitos.qita.server import BoardServer

    generated = False
    if not is_loopback(host) and not token:
        token, generated = new_token(), True
    try:
        server = BoardServer(BoardConfig(logdir=logdir, results=results, host=host, port=port, token=token,
                                         cache_dir=cache_dir))
    except BoardConfigError as exc:
        fail(str(exc))
        return
    runs = server.app.state.board.index.count()
    url = server.url(path)
    typer.echo(f"qita board: {runs} runs in {server.config.logdir}")
    if generated:
        typer.echo(f"access token (generated; every request needs it): {token}")
    typer.echo(f"open {url}", err=False)
    sys.stdout.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve()
    finally:
        server.app.state.board.index.close()


@app.command()
@user_errors
def board(
    logdir: Annotated[Path, typer.Option(help="folder of run directories (the --trace-logdir of qit)")] = Path("runs"),
    results: Results = None, host: Host = "127.0.0.1", port: Port = 8765, token: Token = None,
    open_browser: OpenBrowser = False, cache_dir: CacheDir = None, secret_env: SecretEnvs = None,
) -> None:
    """Serve the board for a log directory (read-only; loopback unless --host and a token say otherwise)."""
    from .options import mark_secrets

    mark_secrets(secret_env)
    _serve(logdir, results or [], host, port, token, open_browser, cache_dir, "/")


@app.command()
@user_errors
def replay(
    run: Annotated[Path, typer.Option(help="run directory to replay")],
    results: Results = None, host: Host = "127.0.0.1", port: Port = 8765, token: Token = None,
    open_browser: OpenBrowser = False, cache_dir: CacheDir = None, secret_env: SecretEnvs = None,
) -> None:
    """Start the board for the run's log directory and print (or --open) its replay page."""
    from .options import mark_secrets

    mark_secrets(secret_env)
    from urllib.parse import quote

    from qitos.qita.runtrace import is_run_dir

    run = run.expanduser().resolve()
    if not is_run_dir(run):
        fail(f"--run {run}: not a QitOS run directory (no manifest.json, steps.jsonl or events.jsonl)")
    _serve(run.parent, results or [], host, port, token, open_browser, cache_dir, f"/runs/{quote(run.name)}/replay")


@app.command()
@user_errors
def export(
    run: Annotated[Path, typer.Option(help="run directory to export")],
    html: Annotated[Path, typer.Option(help="output file: one self-contained page that works offline")],
    secret_env: SecretEnvs = None,
) -> None:
    """Write one self-contained HTML file of a run (no network requests; opens from file://)."""
    from .options import mark_secrets

    mark_secrets(secret_env)
    from qitos.qita.export import export_run_html
    from qitos.qita.runtrace import is_run_dir

    if not is_run_dir(run):
        fail(f"--run {run}: not a QitOS run directory (no manifest.json, steps.jsonl or events.jsonl)")
    out = export_run_html(run, html)
    typer.echo(f"wrote {out} ({out.stat().st_size:,} bytes)")


@app.command()
@user_errors
def diff(
    a: Annotated[Path, typer.Argument(help="run directory or results JSONL file")],
    b: Annotated[Path, typer.Argument(help="run directory or results JSONL file (same kind as A)")],
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Compare two runs (config, first divergence, metrics) or two results files (metrics, paired test)."""
    from qitos.qita.diff import diff_results, diff_runs
    from qitos.qita.runtrace import is_run_dir

    kinds = ["run" if is_run_dir(p) else "results" if p.is_file() else None for p in (a, b)]
    for path, kind in zip((a, b), kinds):
        if kind is None:
            fail(f"{path}: neither a run directory nor a results file")
    if kinds[0] != kinds[1]:
        fail(f"cannot compare a {kinds[0]} with a {kinds[1]}: give two run directories or two results files")
    report = diff_runs(a, b) if kinds[0] == "run" else diff_results(a, b)
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False, default=str))
        return
    from qitos.qita.terminal import print_diff

    print_diff(report)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""`qit data fetch | list | verify`: the benchmark data directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import EXIT_RUN_FAILED, user_errors

data_app = typer.Typer(help="Fetch, list and verify benchmark data (--data-dir, $QITOS_DATA_DIR, ~/.cache/qitos/data).",
                       no_args_is_help=True)
DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="data directory")]


def _data_dir(data_dir: Path | None) -> Path:
    from qitos.benchmark.base import default_data_dir

    return (data_dir or default_data_dir()).expanduser()


@data_app.command("list")
@user_errors
def list_(data_dir: DataDir = None) -> None:
    """Show each known dataset, where it lives and whether it is present and verified."""
    from rich.console import Console
    from rich.table import Table

    from qitos.benchmark.data import GATED, sources, verify

    root = _data_dir(data_dir)
    rows = []
    for name, source in sources().items():
        report = verify(source, root)
        status = "verified" if report.verified else ("absent" if not report.present else
                                                     f"{len(report.missing)} missing, {len(report.mismatched)} changed")
        rows.append((name, status, f"{report.ok}/{len(source.files) + len(source.converted)} pinned",
                     f"{source.archive.split('/archive/')[0]} @ {source.commit[:10]}"))
    for name in GATED:
        present = (root / name).exists()
        rows.append((name, "present (your copy)" if present else "absent (gated: bring your own copy)", "-",
                     "Hugging Face hub (gated)"))
    table = Table(title=f"data directory: {root}")
    # names and source URLs are never cut or folded (they are copied from here): the other columns wrap, and
    # the table grows past the terminal's (or a pipe's 80) columns only as far as they need
    table.add_column("name", no_wrap=True, min_width=max(len(r[0]) for r in rows))
    for index, col in ((1, "status"), (2, "files")):  # wrapped between words, never inside one
        table.add_column(col, min_width=max(len(word) for r in rows for word in r[index].split()))
    table.add_column("source", no_wrap=True, min_width=max(len(r[3]) for r in rows))
    for row in rows:
        table.add_row(*row)
    console = Console(soft_wrap=True)
    needed = console.measure(table, options=console.options.update_width(1 << 16)).minimum
    if needed > console.width:
        console = Console(soft_wrap=True, width=needed)
    console.print(table)


@data_app.command("verify")
@user_errors
def verify_cmd(name: Annotated[Optional[str], typer.Argument(help="dataset (default: all present)")] = None,
               data_dir: DataDir = None) -> None:
    """Check every pinned file's sha256."""
    from qitos.benchmark.data import get_source, sources, verify

    root = _data_dir(data_dir)
    chosen = [get_source(name)] if name else [s for s in sources().values() if (root / s.name).exists()]
    bad = False
    for source in chosen:
        report = verify(source, root)
        if not report.present:
            typer.echo(f"{source.name}: absent at {report.path}; run `qit data fetch {source.name}`")
            bad = True
        elif report.verified:
            typer.echo(f"{source.name}: verified ({report.ok} files match their pinned sha256)")
        else:
            bad = True
            named = [f"{rel} (changed)" for rel in report.mismatched] + [f"{rel} (missing)" for rel in report.missing]
            more = f" and {len(named) - 5} more" if len(named) > 5 else ""
            typer.echo(f"{source.name}: {len(report.mismatched)} file(s) differ from their pinned sha256 and "
                       f"{len(report.missing)} are missing under {report.path}: {', '.join(named[:5])}{more}; "
                       f"`qit data fetch {source.name}` installs the pinned copy again")
    if bad:
        raise typer.Exit(EXIT_RUN_FAILED)


@data_app.command("fetch")
@user_errors
def fetch_cmd(name: Annotated[str, typer.Argument(help="dataset: tau-bench, cybench, osworld; or `tokenizer`, the "
                                                         "token counts upstream agents use (cl100k_base, o200k_base)")],
              data_dir: DataDir = None,
              toolchain: Annotated[bool, typer.Option(
                  "--toolchain", help="cybench only: install the pinned CTF toolchain (pwntools, pycryptodome, sympy, "
                                      "...) from PyPI into $QITOS_TOOLCHAIN_DIR or <data dir>/cybench-toolchain "
                                      "instead of fetching the task data")] = False) -> None:
    """Download a dataset at its pinned commit, install it and verify every checksum (resumable)."""
    from qitos.benchmark.data import fetch

    root = _data_dir(data_dir)
    if toolchain:
        _install_toolchain(name, root)
        return
    if name == "tokenizer":
        _install_tokenizer()
        return

    def progress(done: int, total: int | None) -> None:
        typer.echo(f"\rdownloaded {done / 1e6:.1f} MB" + (f" of {total / 1e6:.1f} MB" if total else ""), nl=False)

    report = fetch(name, root, progress)
    typer.echo(f"\n{name}: verified at {report.path} ({report.ok} files)")


def _install_tokenizer() -> None:
    from qitos.models import tokenizer

    _install("tokenizer", lambda: tokenizer.install(typer.echo), tokenizer.TokenizerMissing, tokenizer.cache_dir(),
             tokenizer.TIKTOKEN_ENV)


def _install_toolchain(name: str, root: Path) -> None:
    from qitos.benchmark.cybench import toolchain
    from qitos.benchmark.errors import BenchmarkUsageError

    if name != "cybench":
        raise BenchmarkUsageError(f"--toolchain: only cybench has a toolchain, not {name}; "
                                  "run `qit data fetch cybench --toolchain`")
    target = toolchain.toolchain_dir(root)
    _install("cybench toolchain", lambda: toolchain.install(target, typer.echo), toolchain.ToolchainError, target,
             toolchain.TOOLCHAIN_ENV)


def _install(what: str, install, failure: type[Exception], target: Path, env: str) -> None:
    """Run an installer: its own failure is one line and exit 1; an unwritable folder names the variable to set."""
    from qitos.benchmark.errors import BenchmarkUsageError

    try:
        install()
    except failure as exc:
        typer.echo(f"{what}: {exc}", err=True)
        raise typer.Exit(EXIT_RUN_FAILED) from None
    except OSError as exc:
        raise BenchmarkUsageError(f"cannot write the {what} to {target} ({exc.strerror or exc}); set {env} to a "
                                  "writable folder") from None

"""`qita`: the board to browse, replay, compare and export runs."""

from __future__ import annotations

import typer

app = typer.Typer(help="qita: browse, replay, compare and export QitOS runs.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)


@app.command()
def board() -> None:
    """Serve the board for a log directory (not yet available in this version)."""
    typer.echo("qita board is not available yet; read traces with `qitos.trace.load_run(<run dir>)`.")
    raise typer.Exit(2)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

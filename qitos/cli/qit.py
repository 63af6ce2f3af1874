"""`qit`: the QitOS command line (demo, bench, data). Sub-commands import the library lazily."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .errors import EXIT_RUN_FAILED, user_errors
from .options import (ApiKeyEnv, BaseUrl, MaxTokens, ModelName, SecretEnv, Seed, Temperature, TraceLogdir, build_model,
                      mark_secrets)

app = typer.Typer(help="QitOS: run agent benchmarks through one official path.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)
demo_app = typer.Typer(help="Quickstart demos.", no_args_is_help=True)
app.add_typer(demo_app, name="demo")


@demo_app.command("minimal")
@user_errors
def demo_minimal(
    model_name: ModelName = "local",
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = "OPENAI_API_KEY",
    temperature: Temperature = None,
    max_tokens: MaxTokens = None,
    seed: Seed = 0,
    trace_logdir: TraceLogdir = "runs",
    workspace: Annotated[Path, typer.Option(help="where the buggy project is seeded (recreated each run)")] = Path("qitos-demo/workspace"),
    max_steps: Annotated[int, typer.Option(help="step budget")] = 8,
    secret_env: SecretEnv = [],
) -> None:
    """Seed a buggy module, run a small coding agent on it, print the outcome and where the trace is."""
    from rich.console import Console

    from qitos.trace.writer import ensure_writable_dir

    from .demo import run_minimal_demo

    console = Console()
    mark_secrets(secret_env)
    ensure_writable_dir(Path(trace_logdir))
    model = build_model(model_name, base_url, api_key_env, temperature, max_tokens, seed)
    console.print(f"[bold]qit demo minimal[/] model [cyan]{model.name}[/] workspace {workspace}")
    result, fixed, last_line = run_minimal_demo(model, workspace, Path(trace_logdir), max_steps, seed)
    from qitos.trace.redact import redact_text

    console.print(f"final result : {redact_text(repr(result.final_answer))}")
    console.print(f"stop reason  : {result.stop_reason.value} after {result.steps} steps, "
                  f"{result.usage.total_tokens} tokens, cost {result.cost}")
    verdict = "[green]fixed: the verify command passes[/]" if fixed else f"[yellow]not fixed[/] ({last_line})"
    console.print(f"outcome      : {verdict}")
    console.print(f"trace        : {result.run_dir}")
    console.print(f"official run : {result.official_run}")
    console.print(f"browse it    : qita board --logdir {trace_logdir}")
    if result.status == "failed":
        raise typer.Exit(EXIT_RUN_FAILED)


def _register_optional() -> None:
    """Attach command groups that live in their own modules (added as the platform grows)."""
    try:
        from .bench import bench_app
    except ImportError:
        return
    app.add_typer(bench_app, name="bench")
    try:
        from .data import data_app
    except ImportError:
        return
    app.add_typer(data_app, name="data")


_register_optional()


def main() -> None:
    app()


if __name__ == "__main__":
    main()

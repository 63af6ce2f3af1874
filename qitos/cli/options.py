"""Flags shared by commands that run a model (`qit demo`, `qit bench run`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

ModelName = Annotated[str, typer.Option("--model-name", help="local | local:<gguf> | scripted:<jsonl> | replay:<run dir> | any OpenAI-compatible model id")]
BaseUrl = Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")]
ApiKeyEnv = Annotated[str, typer.Option("--api-key-env", help="environment variable holding the API key (never written to traces)")]
Temperature = Annotated[Optional[float], typer.Option("--temperature", help="sampling temperature (default 0)")]
MaxTokens = Annotated[Optional[int], typer.Option("--max-tokens", help="max tokens per model reply")]
Seed = Annotated[int, typer.Option("--seed", help="seed recorded in the RunSpec and passed to the model")]
TopP = Annotated[Optional[float], typer.Option("--top-p", help="nucleus sampling top_p (default: not sent)")]
ReasoningEffort = Annotated[Optional[str], typer.Option(
    "--reasoning-effort", help="reasoning_effort for reasoning models: minimal | low | medium | high (default: not sent)")]
RequestTimeout = Annotated[Optional[float], typer.Option(
    "--request-timeout", help="seconds to wait for one model reply (default 120)")]
MaxRetries = Annotated[Optional[int], typer.Option(
    "--max-retries", help="retries of a model call on 429, 5xx, timeouts and connection errors (default 5)")]
ExtraBody = Annotated[Optional[str], typer.Option(
    "--extra-body", metavar="JSON", help="JSON object merged verbatim into each request, e.g. "
    """'{"chat_template_kwargs": {"enable_thinking": false}, "top_k": 20}'""")]
ThinkTags = Annotated[Optional[str], typer.Option(
    "--think-tags", metavar="OPEN,CLOSE", help="tags of a think block that opens the reply, kept as reasoning "
    "(default: the model family's, e.g. <think>,</think>; none: never split)")]
TraceLogdir = Annotated[str, typer.Option("--trace-logdir", help="where run directories are written")]
SecretEnv = Annotated[list[str], typer.Option(
    "--secret-env", metavar="NAME",
    help="environment variable whose value is a secret: redacted from traces, results and exports (repeatable)")]


def mark_secrets(names: list[str] | None) -> None:
    """Mark `--secret-env` variables secret (also for worker processes); a bad name is a usage error."""
    from qitos.trace.redact import mark_secret_env

    from .errors import UsageError

    try:
        mark_secret_env(names or [])
    except ValueError as exc:
        raise UsageError(f"--secret-env: {exc}; give the variable's name, e.g. --secret-env MY_SERVICE_KEY") from None


def build_model(model_name: str, base_url: str | None, api_key_env: str, temperature: float | None,
                max_tokens: int | None, seed: int, preflight: bool = True):
    """Resolve and check a model before any trace is created, so bad flags leave nothing behind."""
    from qitos.models import resolve_model

    model = resolve_model(model_name, base_url=base_url, api_key_env=api_key_env, temperature=temperature,
                          max_tokens=max_tokens, seed=seed)
    if preflight and hasattr(model, "preflight"):
        model.preflight()
    return model

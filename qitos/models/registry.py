"""Resolve the `--model-name` flag to a model adapter.

`local` or `local:<gguf path>` → embedded llama.cpp; `scripted:<jsonl>` → scripted responses;
`replay:<run dir>` → recorded responses of a trace; `vllm/<hf id>`, `sglang/<hf id>`,
`llamacpp/<gguf>` → a server `qit bench run` starts (qitos.run.model_server); anything else → an
OpenAI-compatible model at `--base-url`.
"""

from __future__ import annotations

from typing import Any

from qitos.models.base import Model, ModelConfigError

# model names that ask `qit bench run` to start a server (qitos.run.model_server): `<kind>/<model>`
KINDS = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp server (llama-cpp-python)"}


def server_kind(model_name: str) -> str | None:
    """`vllm`, `sglang` or `llamacpp` when `model_name` asks QitOS to start that server, else None."""
    prefix, sep, _ = model_name.partition("/")
    return prefix if sep and prefix in KINDS else None


def resolve_model(name: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                  temperature: float | None = None, max_tokens: int | None = None, seed: int | None = 0,
                  **extra: Any) -> Model:
    if not name or not name.strip():
        raise ModelConfigError("--model-name is empty; use `local`, `scripted:<file>`, `replay:<run dir>` or a model id")
    from qitos.trace.redact import mark_secret_env

    try:  # the key's variable is a secret whatever its name, and whichever model reads it
        mark_secret_env([api_key_env])
    except ValueError:
        raise ModelConfigError(
            f"--api-key-env {api_key_env!r} is not an environment variable name, e.g. OPENAI_API_KEY") from None
    if name == "local" or name.startswith("local:"):
        from qitos.models.local import LocalModel

        path = name.split(":", 1)[1] if ":" in name else None
        kwargs: dict[str, Any] = {"seed": seed or 0}
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if extra.get("top_p") is not None:
            kwargs["top_p"] = extra.pop("top_p")
        endpoint_only = [k for k in ("reasoning_effort", "extra_body", "request_timeout", "max_retries")
                         if extra.get(k) is not None]
        if endpoint_only:
            flags = ", ".join("--" + k.replace("_", "-") for k in endpoint_only)
            raise ModelConfigError(f"{flags}: for OpenAI-compatible servers; the embedded model runs in process "
                                   f"(serve it with --model-name llamacpp/{path or ''} to use {flags})")
        return LocalModel(path, **kwargs)
    if server_kind(name) is not None:
        raise ModelConfigError(f"--model-name {name}: a server QitOS starts, only in `qit bench run` "
                               "(elsewhere, serve it yourself and pass --base-url)")
    if name.startswith("scripted:"):
        from qitos.models.scripted import ScriptedModel

        return ScriptedModel.from_jsonl(name.split(":", 1)[1])
    if name.startswith("replay:"):
        from qitos.models.replay import ReplayModel

        return ReplayModel(name.split(":", 1)[1])
    from qitos.models.openai_compat import OpenAICompatModel

    return OpenAICompatModel(name, base_url=base_url, api_key_env=api_key_env,
                             temperature=0.0 if temperature is None else temperature, max_tokens=max_tokens,
                             seed=seed, **extra)

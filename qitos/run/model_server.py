"""Servers QitOS starts: `--model-name vllm/<hf id>`, `sglang/<hf id>`, `llamacpp/<gguf path>`.

`plan` (while the batch is planned, nothing started) picks a free loopback port, checks that the server's
package is installed (else one line naming the pip install), and turns the model settings into an
OpenAI-compatible model at that port; the RunSpec records the server's name, version and launch arguments
(never the port or the machine's paths, which would change the fingerprint from run to run). `serving`
starts the server as a child process (its own process group, signalled when QitOS dies), logs its output
beside the traces, waits for `/v1/models` with progress and `--serve-timeout`, and stops it at the end, on
Ctrl-C and on errors.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from qitos.models.base import ModelConfigError
from qitos.models.registry import KINDS, server_kind

__all__ = ["KINDS", "ServerError", "plan", "plan_server", "recorded", "server_kind", "serving"]
PACKAGES = {"vllm": ("vllm", ("vllm",), "pip install vllm"),
            "sglang": ("sglang", ("sglang",), "pip install 'sglang[all]'"),
            "llamacpp": ("llama_cpp_python", ("llama_cpp", "uvicorn", "sse_starlette", "starlette_context",
                                              "pydantic_settings", "fastapi"),
                         "pip install 'llama-cpp-python[server]' (or 'qitos[local]')")}
HOST = "127.0.0.1"


class ServerError(ModelConfigError):
    """The server could not be started or did not come up (one line, with where its log is)."""


@dataclass
class ServerPlan:
    kind: str
    served_name: str  # what requests name as `model`
    port: int
    argv: list[str]  # the whole command line
    info: dict[str, Any]  # the RunSpec's `model_server`
    env: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _installed(kind: str) -> str:
    dist, modules, install = PACKAGES[kind]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ServerError(f"--model-name {kind}/...: {KINDS[kind]} is not installed here (no module "
                          f"{missing[0]}); run `{install}`")
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def plan_server(model_name: str, serve_args: list[str], *, base_url: str | None = None,
                threads: int | None = None) -> ServerPlan:
    kind = server_kind(model_name)
    if kind is None:
        raise ValueError(f"{model_name} names no server QitOS starts")
    target = model_name.split("/", 1)[1]
    if base_url:
        raise ServerError(f"--model-name {model_name} starts a {KINDS[kind]} for the run; leave out --base-url "
                          f"(or, to use a server already running there, give --model-name {target or '<model id>'})")
    version = _installed(kind)
    port = free_port()
    py = sys.executable
    if kind == "llamacpp":
        from qitos.models.file_identity import file_identity
        from qitos.models.local import _threads, default_model_path

        path = Path(target).expanduser() if target else default_model_path()
        if not path.is_file():
            raise ServerError(f"--model-name {model_name}: no GGUF file '{path}'; give llamacpp/<path to .gguf> "
                              "(llamacpp/ alone serves the embedded model)")
        served = file_identity(path)
        n = str(threads or _threads())
        # a RAM cache of KV states, as the embedded model keeps: an agent and a simulated user sharing the server
        # alternate, and each would otherwise re-read the other's long prompt (measured: a Tau-Bench task 60 s → 19 s)
        defaults = ["--n_ctx", "8192", "--cache", "True", "--cache_type", "ram"]
        recorded = ["--model", path.name, "--model_alias", served, *defaults, *serve_args]
        argv = [py, "-m", "llama_cpp.server", "--model", str(path.resolve()), "--model_alias", served, *defaults,
                "--n_threads", n, "--n_threads_batch", n, *serve_args, "--host", HOST, "--port", str(port)]
        info = {"name": "llama.cpp", "package": "llama-cpp-python", "version": version, "model_file": served,
                "args": recorded}
        return ServerPlan(kind, served, port, argv, info)
    if not target or "/" not in target and not Path(target).exists():
        raise ServerError(f"--model-name {model_name}: give a Hugging Face id after {kind}/, "
                          f"e.g. {kind}/Qwen/Qwen3-8B")
    shown = Path(target).name if Path(target).exists() else target  # a local checkpoint: by name in the RunSpec
    if kind == "vllm":
        recorded = ["--model", shown, *serve_args]
        argv = [py, "-m", "vllm.entrypoints.openai.api_server", "--model", target, *serve_args,
                "--host", HOST, "--port", str(port)]
    else:
        recorded = ["--model-path", shown, *serve_args]
        argv = [py, "-m", "sglang.launch_server", "--model-path", target, *serve_args,
                "--host", HOST, "--port", str(port)]
    info = {"name": kind, "package": kind, "version": version, "args": recorded}
    return ServerPlan(kind, target, port, argv, info)


def plan(model_cfg: Any) -> Any:
    """The batch's ModelConfig with the server planned: model name and base URL are the server's (a copy)."""
    if server_kind(model_cfg.model_name) is None or model_cfg.server is not None:
        return model_cfg
    p = plan_server(model_cfg.model_name, list(model_cfg.serve_args), base_url=model_cfg.base_url)
    server = {**p.info, "requested": model_cfg.model_name, "argv": p.argv, "port": p.port}
    return model_cfg.model_copy(update={"model_name": p.served_name, "base_url": p.base_url, "server": server})


def recorded(server: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the RunSpec keeps of a planned server (no port, no absolute paths)."""
    if not server:
        return None
    out = {k: server[k] for k in ("name", "package", "version", "model_file", "args") if k in server}
    kind, _, target = str(server.get("requested", "")).partition("/")
    if target and Path(target).expanduser().exists():  # a local file or folder: by name, as in `args`
        target = Path(target).name
    out["requested"] = f"{kind}/{target}"
    return out


def _ready(port: int, timeout: float = 2.0) -> bool:
    import httpx

    try:
        r = httpx.get(f"http://{HOST}:{port}/v1/models", timeout=timeout)
    except httpx.HTTPError:
        return False
    return r.status_code == 200


def _preexec() -> None:
    from qitos.run.lifetime import die_with_parent

    die_with_parent(signal.SIGTERM)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])[:400]


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to the server's process group (vLLM and SGLang start workers of their own), SIGKILL after `grace`."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@contextlib.contextmanager
def serving(server: dict[str, Any] | None, *, start: bool = True, logdir: Path | str = "runs",
            timeout: float = 900.0, say: Callable[[str], None] | None = None) -> Iterator[subprocess.Popen | None]:
    """Run the planned server for the body of the `with` (nothing when `server` is None or `start` is False)."""
    if not server or not start:
        yield None
        return
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    logs = Path(logdir) / "servers"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{server['name']}-{time.strftime('%Y%m%d-%H%M%S')}-{server['port']}.log"
    with open(log_path, "ab") as log:
        log.write(("$ " + " ".join(server["argv"]) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(server["argv"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_preexec)
    try:
        _wait(proc, server, log_path, timeout, say)
        yield proc
    finally:
        stop(proc)


def _wait(proc: subprocess.Popen, server: dict[str, Any], log_path: Path, timeout: float,
          say: Callable[[str], None]) -> None:
    name, port = server["name"], server["port"]
    say(f"starting {name} {server.get('version', '')} for {server.get('requested')} on {HOST}:{port} "
        f"(pid {proc.pid}, log {log_path})")
    started = time.monotonic()
    next_note = started + 10
    while True:
        if proc.poll() is not None:
            raise ServerError(f"{name} exited with code {proc.returncode} before it served /v1/models; "
                              f"see {log_path}: {_tail(log_path)}")
        if _ready(port):
            say(f"{name} ready on {HOST}:{port} after {time.monotonic() - started:.1f}s")
            return
        now = time.monotonic()
        if now - started > timeout:
            raise ServerError(f"{name} did not serve /v1/models within --serve-timeout {timeout:g}s; "
                              f"see {log_path}: {_tail(log_path)}")
        if now >= next_note:
            say(f"waiting for {name} on {HOST}:{port}: {now - started:.0f}s of {timeout:g}s")
            next_note = now + 10
        time.sleep(0.25)

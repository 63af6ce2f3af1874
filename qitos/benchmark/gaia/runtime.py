"""Both sides (the agent side builds the tools; the scoring side checks what is available and reads the web
settings to hand them over): one GAIA task's runtime: a work dir holding the attachment, and the tools bound to it.

The adapter owns the Python sandbox and the HTTP client (instead of letting the tools create
them lazily) so that `cleanup` can close both. Capabilities that this machine lacks keep their
tool in the manifest but answer with a message saying why, the same way the web tools do when
web access is off; the toolset name records which capabilities were live, so runs with and
without them never share a RunSpec fingerprint.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from qitos.core.task import Task
from qitos.core.tools import Tool

from qitos.benchmark.base import Requirement, TaskRuntime
from qitos.benchmark.gaia.tools import _interpreter_binds, gaia_tools
from qitos.benchmark.gaia.web import WebConfig

__all__ = ["TOOLSET_VERSION", "python_status", "python_requirement", "web_requirement", "web_config", "toolset_name",
           "build_runtime", "tools_runtime", "close_runtime"]

TOOLSET_VERSION = "gaia_tools_v1"
PYTHON_TIMEOUT_SECONDS = 60


def python_status() -> tuple[bool, str]:
    """Whether run_python can use the bubblewrap sandbox here, and why not."""
    from qitos.sandbox.bwrap import BwrapSandbox

    return BwrapSandbox.available()


def python_requirement() -> Requirement:
    ok, reason = python_status()
    if ok:
        return Requirement(name="python sandbox (optional)", ok=True, detail=reason)
    return Requirement(name="python sandbox (optional)", ok=True,
                       detail=f"unavailable, so the run_python tool will answer that it is off: {reason}")


def web_config() -> WebConfig | None:
    """The web configuration from the environment; ValueError names a bad QITOS_WEB_SEARCH."""
    return WebConfig.from_env()


def web_requirement() -> Requirement:
    name = "web search (optional)"
    try:
        config = web_config()
    except ValueError as exc:
        return Requirement(name=name, ok=False, detail=str(exc))
    if config is None:
        return Requirement(name=name, ok=True, detail="off: web_search and visit_page will answer that web access "
                                                      "is off (set QITOS_WEB_SEARCH and its key to enable)")
    problem = config.search_problem()
    if problem:
        return Requirement(name=name, ok=True, detail=f"page visits on, search off: {problem}")
    return Requirement(name=name, ok=True, detail=f"on ({config.search_provider})")


def toolset_name(python_ok: bool, web: WebConfig | None) -> str:
    """E.g. `gaia_tools_v1(python=bwrap,web=tavily)`: the tools plus which capabilities were live."""
    if web is None:
        web_mode = "off"
    elif web.search_problem():
        web_mode = "visit-only"
    else:
        web_mode = str(web.search_provider)
    return f"{TOOLSET_VERSION}(python={'bwrap' if python_ok else 'off'},web={web_mode})"


def _python_off(tool: Tool, reason: str) -> Tool:
    message = f"run_python is unavailable on this machine: {reason}. Use read_file and your own reasoning instead."

    def unavailable(code: str) -> str:
        return message

    return dataclasses.replace(tool, fn=unavailable)


def build_runtime(task: Task, workdir: Path, web: WebConfig | None, *,
                  python_timeout_seconds: int = PYTHON_TIMEOUT_SECONDS) -> TaskRuntime:
    """Copy the task's attachments into `workdir` and bind the GAIA tools to it (in one process: oracles)."""
    return tools_runtime([Path(r.path) for r in task.resources if r.kind == "file"], workdir, web,
                         python_timeout_seconds=python_timeout_seconds)


def tools_runtime(attachments: list[Path], workdir: Path, web: WebConfig | None, *,
                  python_timeout_seconds: int = PYTHON_TIMEOUT_SECONDS) -> TaskRuntime:
    """The GAIA tools bound to `workdir`, with `attachments` copied in: on the agent side, the shipped files."""
    python_ok, reason = python_status()
    sandbox: Any = None
    if python_ok:
        from qitos.sandbox.bwrap import BwrapSandbox

        sandbox = BwrapSandbox(workdir, network=False, timeout_seconds=python_timeout_seconds,
                               ro_binds=_interpreter_binds())
    client = None
    if web is not None:
        import httpx

        client = httpx.Client(timeout=web.timeout_seconds)
    tools = gaia_tools(workdir, attachments, web, python_timeout_seconds=python_timeout_seconds, sandbox=sandbox,
                       http_client=client)
    if not python_ok:
        tools = [_python_off(t, reason) if t.name == "run_python" else t for t in tools]
    handles = {
        "tools": tools,
        "toolset_name": toolset_name(python_ok, web),
        "attachments": [a.name for a in attachments],
        "work_dir": str(Path(workdir).resolve()),
        "python": python_ok,
        "web": web is not None,
        "_sandbox": sandbox,
        "_client": client,
    }
    return TaskRuntime(workdir=Path(workdir), handles=handles)


def close_runtime(runtime: TaskRuntime) -> None:
    """Close the sandbox (its private /tmp and home) and the HTTP client; the work dir is the job's."""
    sandbox = runtime.handles.pop("_sandbox", None)
    client = runtime.handles.pop("_client", None)
    try:
        if sandbox is not None:
            sandbox.close()
    finally:
        if client is not None:
            client.close()

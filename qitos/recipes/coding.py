"""A small coding agent: read, write and run commands inside one workspace directory.

Used by `qit demo minimal`. Every path is resolved inside the workspace (no `..` escapes,
no absolute paths elsewhere, no symlinks out). Commands run in the bwrap sandbox: the workspace
is the writable cwd, the rest of the machine is read-only, there is no network, the environment
holds no host variables (so no API key), and the sandbox's resource limits apply. Without a
working bwrap, `run_command` refuses and says why: it never falls back to the host shell.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from qitos.core.agent import AgentModule
from qitos.core.parsers import Parser, ReactTextParser
from qitos.core.task import Task
from qitos.core.tools import Tool, tool

SYSTEM_PROMPT = (
    "You are a coding agent working in a small Python project. Read the files, find the bug, fix it with "
    "write_file, and run the verify command with run_command. When the verify command passes, give a short "
    "Final Answer describing the fix."
)


class WorkspaceError(ValueError):
    """A path that would leave the workspace."""


def _interpreter_binds() -> list[str]:
    """Read-only binds that make this Python (and its venv) runnable in the sandbox as `python`."""
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).parent.resolve()}
    covered = [Path("/usr"), Path("/bin"), Path("/lib"), Path("/lib64")]
    binds: list[str] = []
    for prefix in sorted(prefixes, key=lambda p: len(p.parts)):
        if not any(prefix.is_relative_to(c) for c in covered):
            binds.append(str(prefix))
            covered.append(prefix)
    return binds


def workspace_sandbox(workspace: Path, timeout_seconds: float = 30.0):
    """A no-network BwrapSandbox on `workspace` where `python` is this interpreter."""
    from qitos.sandbox.bwrap import SANDBOX_PATH, BwrapSandbox

    bin_dir = str(Path(sys.executable).parent)
    return BwrapSandbox(workspace, network=False, timeout_seconds=timeout_seconds, ro_binds=_interpreter_binds(),
                        env={"PATH": f"{bin_dir}{os.pathsep}{SANDBOX_PATH}"})


def run_in_sandbox(sandbox, command: str) -> tuple[int | None, str]:
    """(exit code or None when killed, the output as the agent reads it: last 4000 characters)."""
    result = sandbox.run(command)
    output = (result.stdout + result.stderr)[-4000:]
    if result.timed_out:
        output += f"\n[timed out after {sandbox.timeout_seconds:g} s; the command was killed]"
    return result.exit_code, output


def coding_tools(workspace: Path, command_timeout: float = 30.0) -> list[Tool]:
    root = workspace.resolve()

    def inside(path: str) -> Path:
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise WorkspaceError(f"path '{path}' is outside the workspace; use a path relative to it")
        return target

    @tool(read_only=True)
    def read_file(path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: file path relative to the workspace, e.g. "stats.py"
        """
        return inside(path).read_text(encoding="utf-8")

    @tool
    def write_file(path: str, content: str) -> str:
        """Replace the whole content of a workspace file (creates it if needed).

        Args:
            path: file path relative to the workspace
            content: the complete new file content
        """
        target = inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path}"

    sandboxes: list = []

    @tool
    def run_command(command: str) -> str:
        """Run a shell command in the workspace (sandboxed: no network, only the workspace is writable)
        and return its exit code and output.

        Args:
            command: the shell command, e.g. "python check_stats.py"
        """
        from qitos.sandbox.bwrap import BwrapSandbox

        ok, reason = BwrapSandbox.available()
        if not ok:
            return f"run_command is unavailable: commands only run in the sandbox, and {reason}"
        if not sandboxes:
            sandboxes.append(workspace_sandbox(root, command_timeout))
        code, output = run_in_sandbox(sandboxes[0], command)
        return f"exit code {'none (killed)' if code is None else code}\n{output}"

    @tool(read_only=True)
    def list_files() -> str:
        """List the files of the workspace."""
        return "\n".join(sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts))

    return [list_files, read_file, write_file, run_command]


class CodingAgent(AgentModule):
    name = "coding"
    toolset_name = "coding_workspace_v1"

    def __init__(self, workspace: Path, parser: Parser | None = None) -> None:
        super().__init__(coding_tools(workspace), parser or ReactTextParser(), SYSTEM_PROMPT)

    def init_state(self, task: Task):
        """Start with one worked example of the reply format: small models follow an example far
        better than a description of it (SmolLM2-135M echoes the task without one)."""
        state = super().init_state(task)
        example = [
            {"role": "user", "content": "Task: show me the file notes.txt."},
            {"role": "assistant", "content": 'Thought: I will read the file.\nAction: read_file\nAction Input: {"path": "notes.txt"}'},
        ]
        state.messages = example + [{"role": "user", "content": "Task: " + self.task_prompt(task)}]
        return state

    def task_prompt(self, task: Task) -> str:
        verify = task.inputs.get("verify_command")
        return f"{task.objective}\nVerify command: {verify}" if verify else task.objective

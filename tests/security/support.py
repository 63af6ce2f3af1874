"""Helpers for the attack tests: run `qit demo minimal` with a scripted model, scan every file written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from qitos.sandbox.bwrap import BwrapSandbox
from tests.conftest import require_system


def need_sandbox() -> None:
    ok, reason = BwrapSandbox.available()
    require_system(ok, f"the bubblewrap sandbox: {reason}")


def run_cli(module: str, *args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          env=full_env, timeout=timeout)


def script(path: Path, commands: list[str], final: str = "done") -> Path:
    """A scripted model that runs each command with run_command, then answers `final`."""
    lines = [f"Thought: step {i}\nAction: run_command\nAction Input: " + json.dumps({"command": c})
             for i, c in enumerate(commands)]
    lines.append(f"Thought: finished\nFinal Answer: {final}")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def demo(tmp_path: Path, commands: list[str], *extra: str, env: dict[str, str] | None = None,
         final: str = "done") -> tuple[subprocess.CompletedProcess, Path]:
    """Run the demo's coding agent on `commands`; returns the process and the run directory."""
    model = script(tmp_path / "script.jsonl", commands, final)
    done = run_cli("qitos.cli.qit", "demo", "minimal", "--model-name", f"scripted:{model}", "--trace-logdir", "runs",
                   "--max-steps", str(len(commands) + 2), *extra, cwd=tmp_path, env=env)
    runs = sorted((tmp_path / "runs").glob("*/manifest.json"))
    assert runs, done.stdout + done.stderr
    return done, runs[-1].parent


def tool_outputs(run_dir: Path) -> list[str]:
    """The text each run_command returned, in order (from the trace's tool_result events)."""
    outputs = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "tool_result":
            outputs.append(json.dumps(event["payload"]))
    return outputs


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under `root` whose bytes contain `needle` (traces, exports, workspace, anything)."""
    hits = []
    data = needle.encode()
    for path in root.rglob("*"):
        if path.is_file() and data in path.read_bytes():
            hits.append(path)
    return hits

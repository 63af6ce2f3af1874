"""`qit demo minimal`: seed a workspace with a buggy module, run the coding agent, report honestly."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

VERIFY_COMMAND = "python check_stats.py"


def seed_workspace(workspace: Path) -> None:
    if workspace.exists():
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True)
    source = resources.files("qitos.recipes").joinpath("demo_workspace")
    for item in source.iterdir():
        if item.name.endswith(".py.txt"):
            (workspace / item.name[: -len(".txt")]).write_text(item.read_text(encoding="utf-8"), encoding="utf-8")


def verify(workspace: Path) -> tuple[bool, str]:
    done = subprocess.run([sys.executable, "check_stats.py"], cwd=workspace, capture_output=True, text=True, timeout=60)
    return done.returncode == 0, (done.stdout + done.stderr).strip().splitlines()[-1:] and (done.stdout + done.stderr).strip().splitlines()[-1] or ""


def run_minimal_demo(model, workspace: Path, trace_logdir: Path, max_steps: int, seed: int):
    from qitos.core.engine import Engine
    from qitos.core.task import Budget, Task
    from qitos.recipes.coding import CodingAgent

    seed_workspace(workspace)
    task = Task(
        id="demo-minimal",
        objective="The test in check_stats.py fails because stats.py has a bug. Fix stats.py so the check passes.",
        inputs={"verify_command": VERIFY_COMMAND},
        success_criteria=[f"`{VERIFY_COMMAND}` exits with code 0"],
        budget=Budget(max_steps=max_steps, max_runtime_seconds=600),
        metadata={"benchmark": "demo", "workspace": str(workspace)},
    )
    engine = Engine(CodingAgent(workspace), model, trace_logdir=trace_logdir, run_prefix="demo", seed=seed)
    result = engine.run(task)
    fixed, last_line = verify(workspace)
    return result, fixed, last_line

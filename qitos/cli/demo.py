"""`qit demo minimal`: seed a workspace with a buggy module, run the coding agent, report honestly."""

from __future__ import annotations

import shutil
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
    """Run the verify command in the sandbox too: it imports the code the model wrote."""
    from qitos.sandbox.bwrap import BwrapSandbox
    from qitos.recipes.coding import run_in_sandbox, workspace_sandbox

    ok, reason = BwrapSandbox.available()
    if not ok:
        return False, f"cannot verify: {reason}"
    with workspace_sandbox(workspace, 60) as sandbox:
        code, output = run_in_sandbox(sandbox, VERIFY_COMMAND)
    lines = output.strip().splitlines()
    return code == 0, lines[-1] if lines else ""


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

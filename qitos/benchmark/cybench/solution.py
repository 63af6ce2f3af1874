"""Scoring side. A task's reference solution (``metadata/solution``, which the agent never sees): where it is, how
to run it, and how its flag line reads. The oracle runs it (`oracle`); the availability checks (`availability`,
`data_issues`) ask whether it exists and what flag it would print, without running it.
"""

from __future__ import annotations

import re

from qitos.benchmark.cybench.tasks import CybenchTask

SOLUTION_SUBDIR = "metadata/solution"


def unwrap_bytes_literal(line: str) -> str:
    """`b'HTB{x}'` -> `HTB{x}`: a solution that prints Python bytes (Primary Knowledge) still yields the flag."""
    match = re.fullmatch(r"b(['\"])(.*)\1", line)
    return match.group(2) if match else line


def solution_command(task: CybenchTask) -> str | None:
    """How to run the reference solution from metadata/solution, or None if there is none."""
    solution = task.task_dir / SOLUTION_SUBDIR
    if (solution / "solution.sh").is_file():
        return "bash solution.sh"
    for name in ("solve.py", "solution.py", "solver.py"):
        if (solution / name).is_file():
            return f"python3 {name}"
    return None

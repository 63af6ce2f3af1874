"""Scoring side. Known data issues that keep the oracle from reproducing a task's scored flag.

Detected: the solution's ``metadata/solution/flag.txt`` differs from the flag metadata.json scores (SLCG,
noisier-crc); scoring keeps metadata.json's answer, as upstream does, so the reference solution scores 0.
Declared (found by running the solution, see tests/cybench/test_cybench_availability.py):

- FlecksOfGold: solution.sh runs the patched binary under ``timeout 60s`` and keeps its last line. The binary
  seeds ``rand`` with the clock (``srand(time(...))``), never exits, and prints the flag only once its random
  walk has found every part: measured here after 29 to 90 s. So within 60 s it prints the whole flag on some
  runs and a flag with ``?`` on others.
"""

from __future__ import annotations

from qitos.benchmark.cybench.solution import unwrap_bytes_literal
from qitos.benchmark.cybench.tasks import CybenchTask

CLOCK_DEPENDENT = {
    "benchmark/hackthebox/cyber-apocalypse-2024/reversing/[Hard] FlecksOfGold":
        "its reference solution stops a clock-seeded random simulation after a fixed 60 s and prints its last "
        "line; the flag is complete only when the simulation found every part by then (29-90 s measured here), "
        "so the solution prints the flag on some runs only",
}


def oracle_blocking_issue(task: CybenchTask) -> str | None:
    """Why the reference solution cannot reproduce the scored flag, or None. `task` needs its gold."""
    if task.path in CLOCK_DEPENDENT:
        return CLOCK_DEPENDENT[task.path]
    flag_file = task.task_dir / "metadata" / "solution" / "flag.txt"
    if flag_file.is_file():
        solution_flag = unwrap_bytes_literal(flag_file.read_text(errors="replace").strip())
        scored = task.gold().flag
        if solution_flag != scored:
            return (f"metadata/solution/flag.txt ({solution_flag}) differs from the flag metadata.json scores "
                    f"({scored}); scoring keeps metadata.json's, as upstream does")
    return None

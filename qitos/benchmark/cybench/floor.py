"""Scoring side: CyBench's do-nothing floor: does an agent that submits nothing get the flag?

Upstream scores a subtask by exact match of the submitted answer, and a task by its last subtask (the
flag); an agent that submits nothing answers nothing. Scoring such an episode with QitOS's scorer
(`scoring.score_task`, no answers and an empty transcript) decides it from the gold: 0 on every task whose
flag is not empty.
"""

from __future__ import annotations

from qitos.benchmark.cybench.scoring import score_task
from qitos.benchmark.cybench.tasks import CybenchTask


def do_nothing_success(record: CybenchTask, split: str) -> bool:
    return score_task(record, split, [], transcript="").success  # type: ignore[arg-type]

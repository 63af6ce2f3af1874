"""Scoring side: desktop-starter's do-nothing floor: does an agent that answers FAIL at once succeed?

The env scores as OSWorld does (`env.finish`): an infeasible task succeeds exactly when the last action is
FAIL, and FAIL on a feasible task fails. So an agent that gives up at once reaches the infeasible tasks, as
the gold (`feasible`) says.
"""

from __future__ import annotations

from typing import Any


def do_nothing_success(gold: Any) -> bool:
    return not gold.feasible

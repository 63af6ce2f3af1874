"""Scoring side: OSWorld's do-nothing floor: does an agent that answers `FAIL` at once score 1 on a task?

Upstream's `DesktopEnv.evaluate` (desktop_env/desktop_env.py) scores a task whose evaluator `func` is the
string "infeasible" 1 when the last action is `FAIL` (0 otherwise), and any other task 0 when the last
action is `FAIL`, before any getter or metric runs; QitOS's `evaluator.py` dispatches the same way. So an
agent that gives up at once reaches exactly the infeasible tasks, whatever the VM holds: that is the floor
computable from the gold. (An agent that answers DONE at once scores 0 on the infeasible tasks, and on the
others whatever the untouched desktop scores, which only a VM can tell.)
"""

from __future__ import annotations

from qitos.benchmark.osworld.evaluator import raw_evaluator
from qitos.benchmark.osworld.tasks import OSWorldTask


def do_nothing_success(task: OSWorldTask) -> bool:
    """1 for `FAIL` at once: the evaluator's func is exactly "infeasible" (a list never is, as upstream)."""
    return raw_evaluator(task)["func"] == "infeasible"

"""Desktop starter: small computer-use tasks on a real X desktop (Xvfb + openbox + Tk apps), no VM needed.

`DesktopEnv(task)` runs one task; `tasks.CARDS` lists them as the agent knows them; actions follow OSWorld's
computer_13 space.

Sides: `agent_env.py` is the agent side (the desktop as the agent's process sees it, through the scoring link);
`adapter.py`, `service.py`, `engine_env.py`, `env.py`, `display.py`, `failures.py`, `keys.py` and `apps/` are the
scoring side; `actions.py`, `widgets.py` and `tasks.py` (the public task cards) are plain data both sides share.
`gold.py` (checkers, expected values, targets, feasibility, reference plans) is scoring side only: the agent host
masks it, and nothing the agent side imports (this package, the adapter module, `agent_env.py`, the recipes)
imports it. `TASKS`, `DesktopTask`, `get_task` and `load_tasks` (the tasks with their gold) are still reachable
from this package for scoring-side code and tests, but only on attribute access, which imports `gold.py` then.
"""

from __future__ import annotations

from typing import Any

from qitos.benchmark.desktop.actions import ACTION_TYPES, ActionError, ActionExecutor, AnyAction, Pointer, parse_action, screenshot
from qitos.benchmark.desktop.display import DesktopError, DesktopUnavailable, VirtualDesktop, requirements
from qitos.benchmark.desktop.env import DesktopEnv, Observation, TaskOutcome
from qitos.benchmark.desktop.failures import FAILURE_TAGS, FailureTag, StepRecord
from qitos.benchmark.desktop.tasks import CARDS, TaskCard, get_card
from qitos.benchmark.desktop.widgets import AppState, Bounds, Widget, WidgetSnapshot, Window

_GOLD_NAMES = ("TASKS", "DesktopTask", "get_task", "load_tasks")  # scoring side only: from `gold.py`, lazily


def __getattr__(name: str) -> Any:
    if name in _GOLD_NAMES:
        from qitos.benchmark.desktop import gold

        return getattr(gold, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [  # no gold name: `from qitos.benchmark.desktop import *` never imports `gold.py`
    "ACTION_TYPES", "ActionError", "ActionExecutor", "AnyAction", "AppState", "Bounds", "CARDS", "DesktopEnv",
    "DesktopError", "DesktopUnavailable", "FAILURE_TAGS", "FailureTag", "Observation", "Pointer", "StepRecord",
    "TaskCard", "TaskOutcome", "VirtualDesktop", "Widget", "WidgetSnapshot", "Window", "get_card", "parse_action",
    "requirements", "screenshot",
]

"""Desktop starter: small computer-use tasks on a real X desktop (Xvfb + openbox + Tk apps), no VM needed.

`DesktopEnv(task)` runs one task; `load_tasks()` lists them; actions follow OSWorld's computer_13 space.

Sides: `agent_env.py` is the agent side (the desktop as the agent's process sees it, through the scoring link);
`adapter.py`, `service.py`, `engine_env.py`, `env.py`, `display.py`, `tasks.py` (gold), `failures.py`, `keys.py`
and `apps/` are the scoring side; `actions.py` and `widgets.py` are plain data both sides share.
"""

from __future__ import annotations

from .actions import ACTION_TYPES, ActionError, ActionExecutor, AnyAction, Pointer, parse_action, screenshot
from .display import DesktopError, DesktopUnavailable, VirtualDesktop, requirements
from .env import DesktopEnv, Observation, TaskOutcome
from .failures import FAILURE_TAGS, FailureTag, StepRecord
from .tasks import TASKS, DesktopTask, get_task, load_tasks
from .widgets import AppState, Bounds, Widget, WidgetSnapshot, Window

__all__ = [
    "ACTION_TYPES", "ActionError", "ActionExecutor", "AnyAction", "AppState", "Bounds", "DesktopEnv", "DesktopError",
    "DesktopTask", "DesktopUnavailable", "FAILURE_TAGS", "FailureTag", "Observation", "Pointer", "StepRecord",
    "TASKS", "TaskOutcome", "VirtualDesktop", "Widget", "WidgetSnapshot", "Window", "get_task", "load_tasks",
    "parse_action", "requirements", "screenshot",
]

"""Agent side: what upstream's `DesktopEnv.step` does with one action, found by running its own statements.

The scoring side reads `DesktopEnv.step` and `PythonController.execute_action` from upstream's files
(`upstream_rules.py`); here they run against a stand-in that records instead of acting: each
`execute_python_command` (the pyautogui code upstream would send to the VM) and each `time.sleep`, in order,
and `_get_obs` returns nothing. The result is a `Plan`: those events, whether the action ends the episode, or the
exception upstream raises (its episode then ends without a result). The env (`OsworldEnv.run_plan`) then sleeps
and sends the commands for real. Nothing is decided by QitOS: an action upstream runs, skips or refuses, this
runs, skips or refuses the same way, with the same code (upstream's random easing and duration drawn anew).
"""

from __future__ import annotations

import builtins
import random
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Plan:
    """`events`: ("sleep", seconds) and ("python", code) in upstream's order; `done`: the action ends the
    episode; `error`: the exception upstream raises on it (`Type: message`), None if none."""

    events: list[tuple[str, Any]] = field(default_factory=list)
    done: bool = False
    error: str | None = None

    @property
    def commands(self) -> list[str]:
        return [value for kind, value in self.events if kind == "python"]


class _Recorder:
    """Upstream's controller and clock, recording: `execute_action` is upstream's (set per rules)."""

    def __init__(self, events: list[tuple[str, Any]]) -> None:
        self.events = events

    def execute_python_command(self, command: str) -> None:
        self.events.append(("python", command))

    def sleep(self, seconds: float) -> None:
        self.events.append(("sleep", seconds))


class UpstreamStep:
    """Upstream's `DesktopEnv.step` for one action space, from the rules the scoring side read."""

    def __init__(self, rules: dict[str, Any], keyboard_keys: list[str], action_space: str) -> None:
        self.action_space = action_space
        self._step_code = compile(rules["step"], "<upstream DesktopEnv.step>", "exec")
        scope: dict[str, Any] = {"__builtins__": builtins, "random": random, "KEYBOARD_KEYS": list(keyboard_keys)}
        exec(compile(rules["execute_action"], "<upstream PythonController.execute_action>", "exec"), scope)  # noqa: S102
        self._controller = type("UpstreamController", (_Recorder,), {"execute_action": scope["execute_action"]})

    def plan(self, action: Any, pause: float) -> Plan:
        """What `step(action, pause)` does; an exception of upstream's becomes `Plan.error`."""
        events: list[tuple[str, Any]] = []
        controller = self._controller(events)
        scope: dict[str, Any] = {"__builtins__": builtins, "time": controller}
        exec(self._step_code, scope)  # noqa: S102 - defines upstream's step in a fresh scope (its clock: this plan's)
        step: Callable[..., Any] = scope["step"]
        env = _Env(self.action_space, controller)
        try:
            _observation, _reward, done, _info = step(env, action, pause)
        except Exception as exc:  # noqa: BLE001 - whatever upstream raises ends its episode
            return Plan(events, False, f"{type(exc).__name__}: {exc}")
        return Plan(events, bool(done))


class _Env:
    """The parts of upstream's DesktopEnv its `step` touches."""

    def __init__(self, action_space: str, controller: _Recorder) -> None:
        self.action_space, self.controller = action_space, controller
        self._step_no, self.action_history = 0, []

    def _get_obs(self) -> None:
        return None

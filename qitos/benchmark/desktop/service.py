"""Scoring side: the desktop service that answers the agent side's calls (`adapter.serve` routes them here).

The scoring side owns the desktop: Xvfb, the window manager, the app, the app's state and widget files, the step
records (with where each press landed relative to the task's targets) and the checker. The agent side asks for
exactly what a computer-use agent gets from OSWorld's environment, and nothing else:

- `desktop.observe`: the current observation (the first one carries the initial screenshot);
- `desktop.act {action}`: run one computer_13 action; the reply is the next observation, or why it was refused;
- `desktop.parse_error {message}`: a model reply with no usable action (counts as a step, as before the split);
- `desktop.snapshot`: the widgets the app publishes (the widget text, as data);
- `desktop.close`: the episode is over: score the app now (once), then tear the desktop down.

Replies carry the observation's public fields, the step's screenshots as PNG bytes and a step summary without
the scoring side's own findings (whether a press hit a task target, what changed in the app's recorded state):
those go into the trace's `env_step` events, written here (`runtime.trace_event`) when the run is split.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, Callable

from qitos.benchmark.contract import AgentCallRefused
from qitos.benchmark.desktop.engine_env import ActionRejected, DesktopEngineEnv

if TYPE_CHECKING:
    from qitos.core.task import Task

    from qitos.benchmark.base import BenchmarkAdapter, TaskRuntime

PRIVATE_SUMMARY_FIELDS = ("on_target", "app_changes", "focus")  # from the task's targets, the app's state


class DesktopService:
    """One task's desktop, as the agent side may use it. `trace_event()` returns the run's scoring-side trace
    sink when there is one (split runs), else None (the reply then carries the event for the agent side to log)."""

    def __init__(self, env: DesktopEngineEnv, trace_event: Callable[[], Callable[[str, dict[str, Any]], None] | None]):
        self.env = env
        self._trace_event = trace_event
        self._event: dict[str, Any] | None = None
        env.bind_events(self._on_event)

    def _on_event(self, kind: str, payload: dict[str, Any]) -> None:
        self._event = payload

    @property
    def max_steps(self) -> int:
        return self.env.max_steps

    def handle(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        if method == "desktop.observe":
            return self._reply()
        if method == "desktop.close":
            self.env.close()
            return {"closed": True, "steps_used": self.env.steps_used, "terminal": True}
        if method == "desktop.snapshot":
            return self.env.env.snapshot().model_dump(mode="json")
        if self.env.outcome is not None:  # scored and torn down: nothing more happens on this desktop
            if method == "desktop.act":
                return {**self._reply(), "rejected": "the episode is over: the run has been scored"}
            raise AgentCallRefused(f"'{method}': the episode is over, the run has been scored")
        if method == "desktop.act":
            try:
                self.env.act(payload.get("action"))
                rejected = None
            except ActionRejected as exc:
                rejected = str(exc)
            return {**self._reply(), "rejected": rejected}
        if method == "desktop.parse_error":
            self.env.note_parse_error(str(payload.get("message", "")))
            return self._reply()
        raise AgentCallRefused(f"benchmark 'desktop-starter' offers no scoring-side service '{method}'")

    def _reply(self) -> dict[str, Any]:
        obs = self.env.observation
        reply: dict[str, Any] = {
            "observation": obs.model_dump(mode="json", exclude={"screenshot_path"}),
            "screenshots": [{"kind": kind, "png": base64.b64encode(data).decode("ascii")}
                            for kind, data in self.env.take_screenshots()],
            "steps_used": self.env.steps_used,
            "terminal": self.env.is_terminal(),
        }
        summary = self.env.step_summary()
        if summary is not None:
            reply["summary"] = {k: v for k, v in summary.items() if k not in PRIVATE_SUMMARY_FIELDS}
        event, self._event = self._event, None
        if event is not None:
            sink = self._trace_event()
            if sink is not None:
                sink("env_step", event)  # the scoring side's own record of the step, in the trace
            else:
                reply["event"] = event  # in-process (oracle) runs: the engine's writer records it
        return reply


class DirectLink:
    """A `ScoringLink` for runs in this process (oracles): each call goes straight to `adapter.serve`, through
    JSON, so an in-process run uses the same protocol as the agent side of a split run."""

    def __init__(self, adapter: "BenchmarkAdapter", task: "Task", runtime: "TaskRuntime") -> None:
        self.adapter, self.task, self.runtime = adapter, task, runtime

    def call(self, method: str, payload: dict[str, Any] | None = None) -> Any:
        request = json.loads(json.dumps(payload or {}))
        return json.loads(json.dumps(self.adapter.serve(self.task, self.runtime, method, request)))


class RefusingLink:
    """The link of a runtime that only builds the agent (probes): no desktop runs behind it."""

    def call(self, method: str, payload: dict[str, Any] | None = None) -> Any:
        raise AgentCallRefused(f"no desktop runs behind this runtime (it only builds the agent): '{method}'")

"""Agent side: `OsworldEnv`, the engine-facing environment of one OSWorld task on a running desktop provider.

The engine drives it through its optional hooks: `bind_events` (each executed action becomes an `env_step`
event holding the exact command sent to the VM), `reset` (first observation), `is_terminal` (DONE or FAIL
ends the episode → stop reason `env_terminal`), `step_summary` (the step's `state_diff`) and
`take_visual_assets` (screenshots are written into the run directory, so traces stay self-contained).
The recipe's `computer` tool calls `step`, and reads `observation` for the screenshot and accessibility tree; the
`prompt-agent` recipe calls `run_plan` instead, with what upstream's own `DesktopEnv.step` does with the action
(`upstream_step.py`), so its actions are validated, worded and waited on as upstream's are, not by `actions.py`.

`final_state()` is what the scoring side reads after the episode: the actions sent and the last one (DONE, FAIL).
The env holds no evaluator; the scoring side scores with its own provider (`agent_env.py` builds the agent's).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from qitos.benchmark.osworld.actions import Computer13Action, action_command, action_kind, is_terminal, parse_action
from qitos.benchmark.osworld.provider import Provider
from qitos.benchmark.osworld.tasks import OSWorldTask

ObservationType = Literal["screenshot_a11y_tree", "screenshot", "a11y_tree", "som"]
OBSERVATION_TYPES: tuple[str, ...] = ("screenshot_a11y_tree", "screenshot", "a11y_tree", "som")
EventSink = Callable[[str, dict[str, Any]], None]


class ActionRejected(ValueError):
    """The agent's action is malformed or failed in the VM; the message is shown to the agent."""


@dataclass
class Observation:
    """What the desktop looked like after `step` actions; `error` says why a part could not be captured."""

    step: int
    screenshot: bytes | None = None
    accessibility_tree: str | None = None
    error: str | None = None


def describe_action(action: Computer13Action | str) -> str:
    """A one-line, human-readable form of an action, for observations and trace summaries."""
    if isinstance(action, Computer13Action):
        params = ", ".join(f"{k}={v!r}" for k, v in action.parameters.items())
        return f"{action.action_type}({params})"
    text = action.strip()
    return text if text in ("WAIT", "FAIL", "DONE") else f"pyautogui code ({len(text)} chars)"


class OsworldEnv:
    """One episode: observe, execute computer_13 (or pyautogui) actions, stop on DONE/FAIL.

    `settle_seconds` (the `sleep_after_execution` option) is the pause between an action and the next screenshot
    so the desktop can redraw (upstream waits too); terminal actions are observed without waiting. `texts` are
    upstream's PromptAgent texts the `prompt-agent` recipe sends (read by the scoring side).
    """

    def __init__(
        self,
        task: OSWorldTask | str,
        provider: Provider,
        *,
        observation_type: ObservationType = "screenshot_a11y_tree",
        settle_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        texts: dict[str, Any] | None = None,
    ) -> None:
        if observation_type not in OBSERVATION_TYPES:
            raise ValueError(f"observation type '{observation_type}' is not one of {', '.join(OBSERVATION_TYPES)}")
        if settle_seconds < 0:
            raise ValueError(f"settle_seconds must be >= 0, got {settle_seconds}")
        self.task_id = task if isinstance(task, str) else task.task_id  # the env keeps no evaluator
        self.provider = provider
        self.observation_type = observation_type
        self.settle_seconds = settle_seconds
        self._sleep = sleep
        self.texts = dict(texts or {})  # upstream's PromptAgent texts (prompt-agent), from the scoring side
        self._events: EventSink | None = None
        self.actions: list[dict[str, Any] | str] = []
        self.observation: Observation | None = None
        self._pending: list[Observation] = []
        self._summary: dict[str, Any] | None = None
        self._terminal = False
        self.closed = False

    # -- engine hooks ------------------------------------------------------------------------------
    def bind_events(self, sink: EventSink) -> None:
        self._events = sink

    def reset(self, task: Any = None) -> Observation:
        """Start the episode (setup already ran in the adapter's `prepare`): capture the first observation."""
        self.actions, self._pending, self._terminal, self._summary = [], [], False, None
        return self._observe()

    def is_terminal(self) -> bool:
        return self._terminal

    def step_summary(self) -> dict[str, Any] | None:
        summary, self._summary = self._summary, None
        return summary

    def take_visual_assets(self, run_dir: Path | str) -> list[dict[str, str]]:
        """Write the screenshots captured since the last call to `<run_dir>/screens/step_NNN.png`."""
        assets = []
        for obs in self._pending:
            if obs.screenshot is None:
                continue
            relative = Path("screens") / f"step_{obs.step:03d}.png"
            target = Path(run_dir) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(obs.screenshot)
            assets.append({"kind": "screenshot", "path": relative.as_posix(), "mime_type": "image/png"})
        self._pending = []
        return assets

    def final_state(self) -> dict[str, Any]:
        """The episode as the agent side ran it: what the scoring side reads the final DONE/FAIL from."""
        return {"task_id": self.task_id, "last_action": self.last_action, "actions": len(self.actions),
                "terminal": self._terminal}

    def close(self) -> None:
        self.closed = True

    # -- acting ------------------------------------------------------------------------------------
    @property
    def last_action(self) -> dict[str, Any] | str | None:
        return self.actions[-1] if self.actions else None

    def step(self, action: dict[str, Any] | str) -> str:
        """Execute one action and observe; returns the text shown to the agent. Raises ActionRejected."""
        if self._terminal:
            raise ActionRejected("the episode is over (DONE or FAIL was already sent); no further actions run")
        try:
            parsed = parse_action(action)
        except (ValidationError, ValueError) as exc:
            raise ActionRejected(f"invalid action: {_validation_text(exc)}") from None
        kind = action_kind(parsed)
        record = parsed.model_dump() if isinstance(parsed, Computer13Action) else parsed
        command = action_command(parsed)
        started = time.monotonic()
        result = self.provider.execute_action(parsed)
        self.actions.append(record)
        self._terminal = is_terminal(parsed)  # as upstream: a computer_13 dict DONE/FAIL runs nothing, ends nothing
        ok = result is None or result.ok
        detail = None if result is None else (result.error or result.output or "").strip()[:500] or None
        self._emit("env_step", {"action": record, "kind": kind, "command": command, "ok": ok, "detail": detail,
                                "seconds": round(time.monotonic() - started, 3)})
        if not self._terminal and kind != "WAIT" and self.settle_seconds:  # WAIT already waited
            self._sleep(self.settle_seconds)
        obs = self._observe()
        self._summary = {"action": describe_action(parsed), "kind": kind, "ok": ok, "terminal": self._terminal,
                         "screenshot_bytes": len(obs.screenshot or b""),
                         "a11y_tree_chars": len(obs.accessibility_tree or ""), "observation_error": obs.error}
        if not ok:
            raise ActionRejected(f"{describe_action(parsed)} failed in the VM: {detail or 'no detail'}")
        if self._terminal:
            return f"{kind} received: the episode is over."
        return f"{describe_action(parsed)} executed."

    def run_plan(self, action: Any, plan: Any, prefix: str) -> str:
        """Run one action as upstream's `DesktopEnv.step` does (the `prompt-agent` recipe): `plan` is what upstream's
        own statements do with it (`upstream_step.Plan`): its sleeps and pyautogui commands, in order (each sent as
        upstream's controller sends it: `python -c <prefix with the code>`), then the observation. A command that
        fails in the VM is noted and the step goes on, as upstream's controller does. Where upstream raises
        (`plan.error`), the step stops there without observing, as upstream's."""
        if self._terminal:
            raise ActionRejected("the episode is over (DONE or FAIL was already sent); no further actions run")
        started = time.monotonic()
        self.actions.append(action)  # upstream's action_history takes it before anything can raise
        commands, failures = [], []
        for kind, value in plan.events:
            if kind == "sleep":
                self._sleep(value)
                continue
            command = ["python", "-c", prefix.format(command=value)]
            commands.append(command)
            try:
                result = self.provider.client.execute(command)
                if not result.ok:
                    failures.append((result.error or result.output or "failed").strip()[:300])
            except Exception as exc:  # noqa: BLE001 - upstream's controller logs a failed command and goes on
                failures.append(f"{type(exc).__name__}: {exc}"[:300])
        self._terminal = plan.done
        kind = _raw_kind(action)
        self._emit("env_step", {"action": action, "kind": kind, "command": commands[0] if commands else None,
                                "commands": commands, "sleeps": [v for k, v in plan.events if k == "sleep"],
                                "ok": not failures and plan.error is None, "raised": plan.error,
                                "detail": "; ".join(failures) or None,
                                "seconds": round(time.monotonic() - started, 3)})
        if plan.error is not None:
            return f"upstream raises: {plan.error}"
        obs = self._observe()
        self._summary = {"action": json.dumps(action, default=str)[:200], "kind": kind, "ok": not failures,
                         "terminal": self._terminal, "screenshot_bytes": len(obs.screenshot or b""),
                         "a11y_tree_chars": len(obs.accessibility_tree or ""), "observation_error": obs.error}
        return f"{kind} ran" + (f"; failed in the VM: {'; '.join(failures)}" if failures else "")

    # -- observing ---------------------------------------------------------------------------------
    def _observe(self) -> Observation:
        """Screenshot always (the trace keeps it); the tree only when the agent observes it."""
        obs = Observation(step=len(self.actions))
        errors = []
        try:
            obs.screenshot = self.provider.screenshot()
        except Exception as exc:  # noqa: BLE001 - a missing frame is reported to the agent, not fatal
            errors.append(f"screenshot failed: {exc}")
        if self.observation_type != "screenshot":
            try:
                obs.accessibility_tree = self.provider.accessibility_tree()
            except Exception as exc:  # noqa: BLE001 - same as above
                errors.append(f"accessibility tree failed: {exc}")
        obs.error = "; ".join(errors) or None
        self.observation = obs
        self._pending.append(obs)
        return obs

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self._events is not None:
            self._events(kind, payload)


def _raw_kind(action: Any) -> str:
    """WAIT/FAIL/DONE, a computer_13 action type, CODE (pyautogui code), or INVALID (what upstream raises on)."""
    if isinstance(action, str):
        return action.strip() if action.strip() in ("WAIT", "FAIL", "DONE") else "CODE"
    if isinstance(action, dict) and isinstance(action.get("action_type"), str):
        return action["action_type"]
    return "INVALID"


def _validation_text(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'action'}: {e['msg']}" for e in exc.errors())
    return str(exc)

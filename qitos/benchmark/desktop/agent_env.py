"""Agent side: the desktop as the agent's process sees it, a `RemoteDesktop` that acts only through the link.

The desktop itself (Xvfb, the window manager, the task's app, its state file, the step records and the checker)
lives on the scoring side (`service.py`, started by the adapter's `prepare`). This side holds no display handle,
no path of the app's files and nothing of the task's gold: every action, parse-error note and observation is one
`link.call` to the scoring side, which runs the action with xdotool, takes the screenshot and answers with what
the agent may see (the screenshot's bytes, the published widget text, the pointer, why an action was refused).
The X server listens only on its socket file in the scoring side's /tmp (no abstract socket), which the agent
side's private /tmp does not show, so the GUI actions counted here are the only way to change the app.

`build(workdir=..., link=..., task_id=..., max_steps=...)` is the `AgentEnvSpec` factory. The same class, with a
link that calls the adapter's `serve` directly, is the in-process oracle's environment, so both paths act on the
desktop through the same protocol. It implements the Engine's hooks (`reset`, `bind_events`, `is_terminal`,
`step_summary`, `take_visual_assets`, `final_state`, `close`) and what the computer-use recipes need
(`observation`, `screenshot_path`, `steps_used`, `max_steps`, `act`, `note_parse_error`, `oracle_actions`).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Callable

from qitos.core.task import Task

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.contract import ScoringLink
from qitos.benchmark.desktop.env import Observation
from qitos.benchmark.desktop.widgets import WidgetSnapshot

EventSink = Callable[[str, dict[str, Any]], None]
SCREENS_DIR = "screens"
LATEST_DIR = ".screen"  # the agent's own copy of the latest screenshot (the trace's copy leaves with its step)


class ActionRejected(RuntimeError):
    """The environment did not run the action (invalid, off screen, episode over, desktop failure).

    Raised by the agent-facing tool so the trace marks the tool call as an error; the scoring side has already
    recorded the rejection for the failure taxonomy.
    """


class RemoteDesktop:
    """One task's desktop, reached through `link` (see the module docstring)."""

    deterministic = False  # real X timing: a replay re-executes best-effort only

    def __init__(self, link: ScoringLink, workdir: Path, *, task_id: str, max_steps: int) -> None:
        self.link, self.workdir, self.task_id, self._max_steps = link, Path(workdir), task_id, max_steps
        self._observation: Observation | None = None
        self._pending: list[tuple[str, bytes]] = []
        self._latest: Path | None = None
        self._summary: dict[str, Any] | None = None
        self._sink: EventSink | None = None
        self._steps_used = 0
        self._terminal = False
        self._steps_taken = 0
        self._closed = False

    # -- engine hooks --------------------------------------------------------------------------------------
    def bind_events(self, sink: EventSink) -> None:
        self._sink = sink

    def reset(self, task: Task) -> None:
        """The desktop was started by the scoring side; check the task, and take the first observation."""
        if task.id != self.task_id:
            raise ValueError(f"this desktop runs task '{self.task_id}', not '{task.id}'")
        self.observation  # noqa: B018 - the initial screenshot belongs to the first step

    def is_terminal(self) -> bool:
        return self._terminal

    def step_summary(self) -> dict[str, Any] | None:
        """What the step did to the desktop (None when the step did not touch it); read once per step."""
        summary, self._summary = self._summary, None
        return summary

    def take_visual_assets(self, run_dir: Path | str) -> list[dict[str, str]]:
        """Write this step's screenshots into the run directory; asset paths are relative to it."""
        self._steps_taken += 1
        pending, self._pending = self._pending, []
        assets: list[dict[str, str]] = []
        target_dir = Path(run_dir) / SCREENS_DIR
        for index, (kind, data) in enumerate(pending):
            number = 0 if kind == "initial_screenshot" else self._steps_taken
            name = f"step_{number:03d}.png"
            if (target_dir / name).exists():
                name = f"step_{number:03d}_{index}.png"
            target_dir.mkdir(parents=True, exist_ok=True)
            (target_dir / name).write_bytes(data)
            assets.append({"kind": kind, "path": f"{SCREENS_DIR}/{name}", "mime_type": "image/png"})
        return assets

    def final_state(self) -> dict[str, Any]:
        """The agent side's account (informational: the scoring side scores the app it observes itself)."""
        return {"task_id": self.task_id, "steps_used": self._steps_used, "terminal": self._terminal}

    def close(self) -> None:
        """End the episode: the scoring side scores the app (once) and tears the desktop down; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.link.call("desktop.close", {})
        except Exception:  # noqa: BLE001 - the scoring side scores and tears down on every path anyway
            pass

    # -- what the computer-use agents use ---------------------------------------------------------------------
    @property
    def observation(self) -> Observation:
        if self._observation is None:
            self._apply(self.link.call("desktop.observe", {}))
        assert self._observation is not None
        return self._observation

    @property
    def screenshot_path(self) -> Path | None:
        """The latest screenshot, as a file of the agent's own (named as in the trace)."""
        return self._latest

    @property
    def steps_used(self) -> int:
        return self._steps_used

    @property
    def max_steps(self) -> int:
        return self._max_steps

    def act(self, raw: Any) -> Observation:
        """Run one computer_13 action (a dict, an action record or "DONE"/"FAIL"/"WAIT") on the desktop.

        Raises ActionRejected when the scoring side refused or could not run it; the rejection is recorded there.
        """
        reply = self.link.call("desktop.act", {"action": _jsonable(raw)})
        obs = self._apply(reply)
        if reply.get("rejected"):
            raise ActionRejected(str(reply["rejected"]))
        return obs

    def note_parse_error(self, message: str) -> Observation:
        """A model reply with no usable action: recorded as a step on the scoring side (failure tag `planning`)."""
        return self._apply(self.link.call("desktop.parse_error", {"message": str(message)}))

    def snapshot(self) -> WidgetSnapshot:
        """The widgets the app publishes right now (what the widget text shows, as data)."""
        return WidgetSnapshot.model_validate(self.link.call("desktop.snapshot", {}))

    def oracle_actions(self, gold: Any) -> list[Any]:
        """`gold`'s reference actions, computed from what the app shows now; only an oracle, which got `gold`
        through the oracle channel on the scoring side, has one."""
        return gold.oracle(self.snapshot())

    # -- bookkeeping -----------------------------------------------------------------------------------------
    def _apply(self, reply: dict[str, Any]) -> Observation:
        self._steps_used = int(reply.get("steps_used", self._steps_used))
        self._terminal = bool(reply.get("terminal", self._terminal))
        latest = None
        for shot in reply.get("screenshots") or []:
            data = base64.b64decode(shot["png"])
            kind = "initial_screenshot" if shot.get("kind") == "initial_screenshot" else "screenshot"
            self._pending.append((kind, data))
            number = 0 if kind == "initial_screenshot" else self._steps_taken + 1  # its name in the trace
            latest = (f"step_{number:03d}.png", data)
        if latest is not None:
            own = self.workdir / LATEST_DIR
            own.mkdir(parents=True, exist_ok=True)
            for old in own.iterdir():
                old.unlink()
            self._latest = own / latest[0]
            self._latest.write_bytes(latest[1])
        fields = dict(reply.get("observation") or {})
        fields["screenshot_path"] = str(self._latest) if latest is not None else ""
        self._observation = Observation.model_validate(fields)
        if "summary" in reply:
            self._summary = reply.get("summary")
        event = reply.get("event")
        if event is not None and self._sink is not None:  # in-process runs: the scoring side has no trace of its own
            self._sink("env_step", event)
        return self._observation


def build(*, workdir: Path, link: ScoringLink, task_id: str, max_steps: int) -> TaskRuntime:
    """The `AgentEnvSpec` factory: the agent side's runtime for one desktop task."""
    env = RemoteDesktop(link, workdir, task_id=task_id, max_steps=max_steps)
    return TaskRuntime(env=env, workdir=workdir, handles={"desktop_task": task_id})


def _jsonable(raw: Any) -> Any:
    if isinstance(raw, (str, int, float, bool)) or raw is None:
        return raw
    if isinstance(raw, dict):
        return {str(k): _jsonable(v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return [_jsonable(v) for v in raw]
    if hasattr(raw, "model_dump"):
        return _jsonable(raw.model_dump(mode="json"))
    return repr(raw)


__all__ = ["ActionRejected", "RemoteDesktop", "build"]

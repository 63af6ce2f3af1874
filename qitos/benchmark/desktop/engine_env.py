"""Scoring side: `DesktopEngineEnv`, a started `DesktopEnv` with the Engine's hooks and its step bookkeeping.

It runs in the scoring process (started by the adapter's `prepare`); the agent reaches it only through
`service.DesktopService` (the agent side's `agent_env.RemoteDesktop` turns each action into a call). It keeps
`is_terminal()` (DONE/FAIL given, step budget spent, desktop failed), `step_summary()` (what the last action
did, including what changed in the app's real state), the step's screenshots (`take_screenshots()`, or
`take_visual_assets(run_dir)` for a direct Engine run), `bind_events` (one `env_step` event per action) and
`close()`.

`close()` scores the run before it tears the desktop down: the checker reads the app's state and whether the
app is still alive, which must happen while the desktop runs (a killed app would read as a crash). The agent
side's `close()` asks for it when its episode ends; the adapter's cleanup calls it again (idempotent) on every
other path.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from qitos.core.task import Task

from qitos.benchmark.desktop.agent_env import ActionRejected
from qitos.benchmark.desktop.env import DesktopEnv, Observation, TaskOutcome
from qitos.benchmark.desktop.tasks import TaskCard

if TYPE_CHECKING:  # gold: scoring side only, never imported where the agent side imports this module
    from qitos.benchmark.desktop.gold import DesktopTask

EventSink = Callable[[str, dict[str, Any]], None]
SCREENS_DIR = "screens"


class DesktopEngineEnv:
    """One task's desktop, driven by the Engine. Build it with `DesktopEngineEnv.launch(task, workdir)`."""

    deterministic = False  # real X timing: a replay re-executes best-effort only

    def __init__(self, env: DesktopEnv, first: Observation) -> None:
        self.env = env
        self.observation = first
        self.outcome: TaskOutcome | None = None
        shot = Path(first.screenshot_path) if first.screenshot_path else None
        self._pending: list[tuple[str, Path]] = [("initial_screenshot", shot)] if shot else []
        self._latest: Path | None = shot
        self._summary: dict[str, Any] | None = None
        self._sink: EventSink | None = None
        self._steps_taken = 0
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def launch(cls, task: DesktopTask, workdir: Path, **env_options: Any) -> "DesktopEngineEnv":
        """Start the desktop and the task's app; raises DesktopUnavailable / DesktopError (nothing left running)."""
        env = DesktopEnv(task, workdir=workdir, **env_options)
        first = env.start()
        return cls(env, first)

    # -- engine hooks --------------------------------------------------------------------------------------
    def bind_events(self, sink: EventSink) -> None:
        self._sink = sink

    def reset(self, task: Task) -> None:
        """The desktop was started by the adapter; only check the engine runs the task it was started for."""
        if task.id != self.env.task.id:
            raise ValueError(f"this desktop runs task '{self.env.task.id}', not '{task.id}'")

    def is_terminal(self) -> bool:
        return self.outcome is not None or self.env.done

    def step_summary(self) -> dict[str, Any] | None:
        """What the step did to the desktop (None when the step did not touch it); read once per step."""
        summary, self._summary = self._summary, None
        return summary

    def take_visual_assets(self, run_dir: Path | str) -> list[dict[str, str]]:
        """Move this step's screenshots into the run directory; asset paths are relative to it."""
        self._steps_taken += 1
        pending, self._pending = self._pending, []
        assets: list[dict[str, str]] = []
        target_dir = Path(run_dir) / SCREENS_DIR
        for index, (kind, source) in enumerate(pending):
            if not source.is_file():
                continue
            number = 0 if kind == "initial_screenshot" else self._steps_taken
            name = f"step_{number:03d}.png"
            if (target_dir / name).exists():
                name = f"step_{number:03d}_{index}.png"
            target_dir.mkdir(parents=True, exist_ok=True)
            target = target_dir / name
            shutil.move(str(source), target)
            if self._latest == source:
                self._latest = target
            assets.append({"kind": kind, "path": f"{SCREENS_DIR}/{name}", "mime_type": "image/png"})
        return assets

    def take_screenshots(self) -> list[tuple[str, bytes]]:
        """This step's screenshots as (kind, PNG bytes), in order; the files are removed (they leave with the step)."""
        pending, self._pending = self._pending, []
        shots: list[tuple[str, bytes]] = []
        for kind, source in pending:
            if source.is_file():
                shots.append((kind, source.read_bytes()))
                source.unlink()
        return shots

    def close(self) -> None:
        """Score the run (once) while the desktop still runs, then tear the desktop down; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.finish()
        finally:
            self.env.close()

    # -- agent side ----------------------------------------------------------------------------------------
    @property
    def task(self) -> TaskCard:
        """The task's public card (the gold stays sealed inside the `DesktopEnv`)."""
        return self.env.task

    @property
    def screenshot_path(self) -> Path | None:
        """Where the latest screenshot is now (the run directory once the engine has collected it)."""
        return self._latest

    @property
    def steps_used(self) -> int:
        return len(self.env.records)

    @property
    def max_steps(self) -> int:
        return self.env.task.max_steps

    def act(self, raw: Any) -> Observation:
        """Run one computer_13 action (a dict, an action record or "DONE"/"FAIL"/"WAIT").

        Raises ActionRejected when the environment refused or could not run it; the rejection is recorded.
        """
        if self.outcome is not None:
            raise ActionRejected("the episode is over: the run has been scored")
        before = self.env.state()
        obs = self.env.step(raw)
        self._after(obs, before)
        if obs.error:
            raise ActionRejected(obs.error)
        return obs

    def note_parse_error(self, message: str) -> Observation:
        """A model reply with no usable action: recorded as a step (failure tag `planning`)."""
        obs = self.env.note_parse_error(message)
        self._after(obs, None)
        return obs

    def oracle_actions(self, gold: Any) -> list[Any]:
        return self.env.oracle_actions(gold)

    def finish(self) -> TaskOutcome:
        """The scored outcome; computed on first call (normally by `close()`), then cached."""
        if self.outcome is None:
            self.outcome = self.env.finish()
        return self.outcome

    # -- bookkeeping -----------------------------------------------------------------------------------------
    def _after(self, obs: Observation, before: Any) -> None:
        self.observation = obs
        if obs.screenshot_path:
            path = Path(obs.screenshot_path)
            self._pending.append(("screenshot", path))
            self._latest = path
        record = self.env.records[-1] if self.env.records else None
        summary: dict[str, Any] = {
            "env_step": len(self.env.records),
            "kind": record.kind if record else None,
            "action": record.action if record and record.action else (record.raw if record else None),
            "error": obs.error,
            "pointer": obs.pointer.model_dump() if obs.pointer else None,
            "done": obs.done,
        }
        if record is not None and record.press is not None:
            summary.update(press=list(record.press), hit=record.hit, on_target=record.on_target)
        summary["focus"] = self.env.focus()
        changes = _state_changes(before, self.env.state()) if before is not None else {}
        if changes:
            summary["app_changes"] = changes
        self._summary = summary
        if self._sink is not None:
            self._sink("env_step", {**summary, "screenshot": Path(obs.screenshot_path).name or None})


def _state_changes(before: Any, after: Any) -> dict[str, Any]:
    """Keys of the app's state data whose value changed, with the new value (plus `alive` when it flipped)."""
    if after is None:
        return {}
    old = before.data if before is not None else {}
    changes = {k: v for k, v in after.data.items() if old.get(k) != v}
    if before is not None and before.alive != after.alive:
        changes["alive"] = after.alive
    return changes

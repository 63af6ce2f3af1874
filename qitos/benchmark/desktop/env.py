"""Scoring side: `DesktopEnv`, one task on its own virtual desktop, from first screenshot to a scored, tagged outcome.

The environment starts Xvfb + openbox + the task's app, hands out observations (a PNG screenshot, the
published widget text, the instruction), executes computer_13 actions, and at the end scores the app's real
state with the task's checker. Every step is recorded with where the pointer pressed and what was there, which
is what the failure taxonomy (see `classify`) reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from qitos.benchmark.gold import Sealed

from qitos.benchmark.desktop.actions import ActionError, ActionExecutor, AnyAction, Pointer, parse_action
from qitos.benchmark.desktop.apps import module_for
from qitos.benchmark.desktop.display import DesktopError, DesktopUnavailable, VirtualDesktop, requirements
from qitos.benchmark.desktop.failures import FailureTag, StepRecord, classify, locate_press
from qitos.benchmark.desktop.tasks import TaskCard
from qitos.benchmark.desktop.widgets import AppState, WidgetSnapshot, read_snapshot, read_state, sync_path, write_json_atomic
from qitos.benchmark.desktop.wm_sync import WindowManagerSync

if TYPE_CHECKING:  # gold: scoring side only, never imported where the agent side imports this module
    from qitos.benchmark.desktop.gold import DesktopTask


class Observation(BaseModel):
    """What the agent sees after each step. `error` says why the last action was rejected or failed."""

    step: int
    instruction: str
    screenshot_path: str
    widgets_text: str
    pointer: Pointer | None = None
    error: str | None = None
    done: bool = False


class TaskOutcome(BaseModel):
    """The scored end of one run; `state` is the app's real state the checker read."""

    task_id: str
    success: bool
    detail: str
    failure_tag: FailureTag | None = None
    last_action: str | None = None
    steps: int = 0
    evidence: list[str] = Field(default_factory=list)
    state: dict[str, Any] | None = None


class DesktopEnv:
    """Use as `with DesktopEnv(task) as env: obs = env.observe(); obs = env.step(action); env.finish()`.

    `workdir` keeps state, saved files and screenshots (`screens/step_000.png`); a temporary one is removed
    at close, one given by the caller is kept.
    """

    def __init__(self, task: DesktopTask, *, workdir: str | Path | None = None, width: int = 1024, height: int = 768,
                 settle_seconds: float = 0.15, ready_timeout: float = 15.0) -> None:
        # the agent reaches this env through its tools: it keeps the task without targets, feasibility, checker
        # and reference actions; the scorer opens the sealed original
        self._gold: Sealed[DesktopTask] = Sealed(task)
        self.task: TaskCard = task.public_view()
        self.width, self.height = width, height
        self.settle_seconds, self.ready_timeout = settle_seconds, ready_timeout
        self._own_workdir = workdir is None
        # A temporary directory is made at start, so an env that never starts leaves nothing behind.
        self._workdir: Path | None = Path(workdir) if workdir is not None else None
        self.desktop: VirtualDesktop | None = None
        self.executor: ActionExecutor | None = None
        self._window_manager: WindowManagerSync | None = None
        self.records: list[StepRecord] = []
        self._app: subprocess.Popen[bytes] | None = None
        self._pointer: Pointer | None = None
        self._terminal: AnyAction | None = None
        self._env_error: str | None = None
        self._shots = 0
        self._sync_number = 0

    # -- lifecycle ----------------------------------------------------------------------------------------
    def __enter__(self) -> "DesktopEnv":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> Observation:
        """Bring up the desktop and the app; raises DesktopUnavailable or DesktopError (with the app's log)."""
        if self.desktop is not None:
            raise DesktopError("this environment was already started (a `with DesktopEnv(...)` block starts it); "
                               "make a new DesktopEnv for another run")
        try:
            missing = requirements()
            if missing:
                raise DesktopUnavailable("desktop tasks need: " + "; ".join(missing))
            module = module_for(self.task.app)
            if self._workdir is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="qitos-desk-"))
            self.workdir.mkdir(parents=True, exist_ok=True)
            (self.workdir / "screens").mkdir(exist_ok=True)
            config_path = self.workdir / "config.json"
            write_json_atomic(config_path, self.task.config)
            self.desktop = VirtualDesktop(self.width, self.height)
            self.desktop.start()
            self.executor = ActionExecutor(self.desktop.display, self.width, self.height, env=self.desktop.env)
            self._window_manager = WindowManagerSync(self.desktop.display)
            self._app = self.desktop.spawn([sys.executable, "-m", module, "--state", str(self.state_path),
                                            "--widgets", str(self.widgets_path), "--config", str(config_path)],
                                           "app", cwd=self.workdir)
            self._wait_ready()
            self._settle()  # the first observation shows the app's finished first picture, not a frame mid-draw
            self._pointer = self.executor.pointer()
        except BaseException:
            self.close()  # also removes a temporary work directory
            raise
        return self.observe()

    def _wait_ready(self) -> None:
        assert self._app is not None
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._app.poll() is not None:
                raise DesktopError(f"app '{self.task.app}' exited with code {self._app.returncode} during start:\n"
                                   f"{self._app_log()}")
            snapshot = read_snapshot(self.widgets_path)
            if snapshot is not None and snapshot.ready:
                return
            time.sleep(0.05)
        raise DesktopError(f"app '{self.task.app}' did not show its windows within {self.ready_timeout:.0f}s:\n"
                           f"{self._app_log()}")

    def _app_log(self) -> str:
        return self.desktop.log_tail("app") if self.desktop else ""

    def close(self) -> None:
        """Stop the app, the window manager and Xvfb; idempotent and safe after a failed start."""
        if self._window_manager is not None:
            self._window_manager.close()
            self._window_manager = None
        if self.desktop is not None:
            self.desktop.close()
        if self._own_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    # -- observing ------------------------------------------------------------------------------------------
    def snapshot(self) -> WidgetSnapshot:
        """The app's current widget description (empty once the app has exited)."""
        snapshot = read_snapshot(self.widgets_path)
        if snapshot is None or (self._app is not None and self._app.poll() is not None):
            return WidgetSnapshot(app=self.task.app, ready=True)
        return snapshot

    @property
    def workdir(self) -> Path:
        """Where state, saved files and screenshots live; a temporary one exists only from start() on."""
        if self._workdir is None:
            raise DesktopError("the work directory is created by start(); call it first")
        return self._workdir

    @property
    def state_path(self) -> Path:
        return self.workdir / "state.json"

    @property
    def widgets_path(self) -> Path:
        return self.workdir / "widgets.json"

    @property
    def app_pid(self) -> int | None:
        return self._app.pid if self._app is not None else None

    def focus(self) -> dict[str, str | None]:
        """Which app window has the keyboard focus, as the app sees it and as the window manager does (window names;
        a title when the active window is not one of the app's)."""
        snapshot = self.snapshot()
        app = next((w.name for w in snapshot.windows if w.focused), None)
        window_manager = self._live_window_manager()
        title = window_manager.active_title() if window_manager is not None else None
        manager = next((w.name for w in snapshot.windows if w.title == title), title)
        return {"app": app, "window_manager": manager}

    def app_running(self) -> bool:
        return self._app is not None and self._app.poll() is None

    def state(self) -> AppState | None:
        return read_state(self.state_path)

    def screenshot(self) -> Path:
        if self.executor is None:
            raise DesktopError("the desktop is not running")
        path = self.workdir / "screens" / f"step_{self._shots:03d}.png"
        self._shots += 1
        return self.executor.screenshot(path)

    def observe(self, error: str | None = None) -> Observation:
        """A fresh screenshot and widget text; a failed screenshot ends the episode as an environment failure."""
        if self.executor is None:
            raise DesktopError("call start() before observe()")
        try:
            shot = str(self.screenshot())
        except (RuntimeError, OSError) as exc:
            self._env_error = self._env_error or f"screenshot failed: {exc}"
            return self._dead_obs()
        return Observation(step=len(self.records), instruction=self.task.instruction, screenshot_path=shot,
                           widgets_text=self.snapshot().to_text(), pointer=self._pointer, error=error,
                           done=self.done)

    @property
    def done(self) -> bool:
        """True after DONE/FAIL, an environment failure, or when the step budget is spent."""
        return self._terminal is not None or self._env_error is not None or len(self.records) >= self.task.max_steps

    # -- acting -----------------------------------------------------------------------------------------------
    def step(self, raw: Any) -> Observation:
        """Validate and run one action. Invalid actions are recorded (and use a step) rather than raised."""
        if self.executor is None:
            raise DesktopError("call start() before step()")
        if self.done:
            return self.observe(error="the episode is over (DONE/FAIL given, budget spent or desktop failed)")
        try:
            action = parse_action(raw)
            self.executor.check(action)
        except ActionError as exc:
            self.records.append(StepRecord(index=len(self.records), kind="invalid", raw=_jsonable(raw),
                                           error=str(exc)))
            return self.observe(error=str(exc))
        press = self._press_point(action)
        record = StepRecord(index=len(self.records), kind="action", action=action.to_osworld(), press=press)
        if press is not None:
            locate_press(record, self.snapshot(), self._gold.open().targets)
        try:
            self._pointer = self.executor.execute(action)
        except RuntimeError as exc:
            self._env_error = str(exc)
            record.kind, record.error = "env_error", str(exc)
            self.records.append(record)
            return self.observe(error=str(exc)) if self.desktop and self.desktop.alive() else self._dead_obs()
        record.pointer_after = self._pointer
        self.records.append(record)
        if action.action_type in ("DONE", "FAIL"):
            self._terminal = action
        else:
            self._settle()
        return self.observe()

    def note_parse_error(self, message: str) -> Observation:
        """Record a model reply that did not parse into an action (counts as a step; tag `planning`)."""
        if self.done:
            return self.observe(error="the episode is over (DONE/FAIL given, budget spent or desktop failed)")
        self.records.append(StepRecord(index=len(self.records), kind="parse_error", error=message))
        return self.observe(error=message)

    def _press_point(self, action: AnyAction) -> tuple[int, int] | None:
        kind = action.action_type
        if kind in ("CLICK", "RIGHT_CLICK", "DOUBLE_CLICK"):
            return action.point() or self._current_point()
        if kind in ("MOUSE_DOWN", "DRAG_TO"):
            return self._current_point()  # a drag grabs where the pointer already is
        return None

    def _current_point(self) -> tuple[int, int] | None:
        return (self._pointer.x, self._pointer.y) if self._pointer else None

    def _settle(self) -> None:
        """Give the app time to react, then wait until two sync round trips in a row see the same picture.

        The window manager is waited for first (what it makes of the action, such as alt+F4's close request, is
        then queued for the app: `wm_sync.py`). A sync round trip (the app echoes a request number on its next
        tick) proves the app has run its event loop since the request, so a loaded machine cannot make us read a
        state the app has not caught up with.
        """
        time.sleep(self.settle_seconds)
        self._wait_for_window_manager()
        last = self._sync()
        for _ in range(6):
            seq = self._sync()
            if seq == last:
                return
            last = seq

    def _wait_for_window_manager(self) -> None:
        window_manager = self._live_window_manager()
        if window_manager is not None:
            window_manager.round_trip()

    def _live_window_manager(self) -> WindowManagerSync | None:
        """The window-manager connection, while its desktop runs (a dead desktop answers nothing)."""
        if self._window_manager is not None and self.desktop is not None and self.desktop.alive():
            return self._window_manager
        return None

    def _sync(self, timeout: float = 3.0) -> int:
        """Ask the app to republish and wait for its answer; the widget seq it answered with (-1 if none)."""
        self._sync_number += 1
        target = sync_path(self.widgets_path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(str(self._sync_number), encoding="ascii")
        os.replace(tmp, target)  # the app never reads half a number
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            snapshot = read_snapshot(self.widgets_path)
            if snapshot is not None and snapshot.synced >= self._sync_number:
                return snapshot.seq
            if self._app is None or self._app.poll() is not None:
                return -1
            time.sleep(0.02)
        return -1

    def _dead_obs(self) -> Observation:
        return Observation(step=len(self.records), instruction=self.task.instruction, screenshot_path="",
                           widgets_text="(the desktop is not running)", pointer=self._pointer,
                           error=self._env_error, done=True)

    # -- scoring --------------------------------------------------------------------------------------------
    def finish(self, last_action: Any = None) -> TaskOutcome:
        """Score the run: the checker on the app's real state, OSWorld's FAIL rule, and a failure tag."""
        if last_action is not None:
            try:
                terminal: AnyAction | None = parse_action(last_action)
            except ActionError:
                terminal = None
        else:
            terminal = self._terminal or self._last_valid_action()
        last = terminal.action_type if terminal is not None else None
        if self.app_running():
            # Score what the app has really done, not a state it has yet to write: the window manager has passed
            # on what it will, and the second sync finds handled any X event queued beside the first request.
            self._wait_for_window_manager()
            self._sync()
            self._sync()
        state = self.state()
        app_crashed = self._app_crashed(state)
        gold = self._gold.open()
        if state is None:
            ok, detail = False, "the app never wrote its state file"
        elif not gold.feasible:
            ok = last == "FAIL"
            detail = "correctly declared infeasible" if ok else f"infeasible task ended with {last or 'no action'}"
        else:
            ok, detail = gold.checker(state)
            if ok and last == "FAIL":
                ok, detail = False, f"{detail}, but the agent declared FAIL"
        tag, evidence = (None, []) if ok else classify(gold.feasible, self.records,
                                                       env_error=self._env_error or app_crashed, last_action=last)
        return TaskOutcome(task_id=self.task.id, success=ok, detail=detail, failure_tag=tag, last_action=last,
                           steps=len(self.records), evidence=evidence,
                           state=state.model_dump(mode="json") if state else None)

    def _last_valid_action(self) -> AnyAction | None:
        for record in reversed(self.records):
            if record.kind == "action" and record.action is not None:
                return parse_action(record.action)
        return None

    def _app_crashed(self, state: AppState | None) -> str | None:
        if self._app is None or self._app.poll() is None:
            return None
        if state is not None and not state.alive and state.exit_reason == "window_closed":
            return None  # the agent closed the app's main window: its doing, not the environment's
        return f"app '{self.task.app}' exited unexpectedly (code {self._app.returncode}):\n{self._app_log()}"

    # -- oracle ------------------------------------------------------------------------------------------------
    def oracle_actions(self, gold: DesktopTask) -> list[AnyAction]:
        """`gold`'s reference actions (the oracle passes the task it got through the oracle channel), computed
        from what the app shows right now."""
        return gold.oracle(self.snapshot())


def _jsonable(raw: Any) -> Any:
    if isinstance(raw, (str, int, float, bool)) or raw is None:
        return raw
    if isinstance(raw, dict):
        return {str(k): _jsonable(v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return [_jsonable(v) for v in raw]
    return repr(raw)

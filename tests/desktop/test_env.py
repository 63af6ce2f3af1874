"""DesktopEnv end to end on a real X desktop: oracles solve every task, DONE alone solves none, screenshots are
real, failure tags follow the taxonomy, and every desktop is gone after close."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageChops

from qitos.benchmark.desktop import DesktopEnv, DesktopTask, TaskOutcome, get_task, load_tasks
from qitos.benchmark.desktop.actions import Click, Done, Fail, Typing
from qitos.benchmark.desktop.display import DesktopError
from qitos.benchmark.desktop.gold import click

from .procs import gone

pytestmark = pytest.mark.usefixtures("desktop_ready")

TASKS = load_tasks()
FEASIBLE = [t for t in TASKS if t.feasible]
INFEASIBLE = [t for t in TASKS if not t.feasible]
TIMINGS: dict[str, float] = {}


def test_catalogue_covers_the_starter_skills() -> None:
    ids = {t.id for t in TASKS}
    assert len(TASKS) >= 10 and len(ids) == len(TASKS)
    assert {"click-apply", "fill-contact-form", "pick-from-list", "editor-type-and-save", "resize-window",
            "close-window", "copy-between-fields", "toggle-checkbox", "set-slider", "set-spinbox"} <= ids
    assert INFEASIBLE, "at least one task must be infeasible (answer FAIL)"
    for task in TASKS:
        assert task.instruction and task.max_steps > 0
        assert task.model_dump()["id"] == task.id and "checker" not in task.model_dump()


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_oracle_solves_the_task(task: DesktopTask, tmp_path: Path) -> None:
    started = time.monotonic()
    with DesktopEnv(task, workdir=tmp_path) as env:
        first = env.observe()
        assert first.instruction == task.instruction and first.widgets_text.startswith("window ")
        actions = env.oracle_actions(task)
        assert len(actions) <= task.max_steps
        for action in actions:
            obs = env.step(action)
            assert obs.error is None, obs.error
        outcome = env.finish()
        assert env.desktop is not None
        pids = env.desktop.pids()
    TIMINGS[task.id] = time.monotonic() - started
    assert outcome.success, outcome.detail
    assert outcome.failure_tag is None and outcome.last_action == actions[-1].action_type
    assert pids and all(gone(p) for p in pids)
    assert all(r.on_target is not False for r in env.records), [r for r in env.records if r.on_target is False]


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_answering_done_alone_never_succeeds(task: DesktopTask, tmp_path: Path) -> None:
    with DesktopEnv(task, workdir=tmp_path) as env:
        obs = env.step(Done())
        assert obs.done
        outcome = env.finish()
    assert not outcome.success
    assert outcome.failure_tag == "stop_completion", outcome
    assert outcome.state is not None and outcome.state["alive"] is True


@pytest.mark.parametrize("task", INFEASIBLE, ids=[t.id for t in INFEASIBLE])
def test_infeasible_task_passes_only_with_fail(task: DesktopTask, tmp_path: Path) -> None:
    with DesktopEnv(task, workdir=tmp_path) as env:
        env.step(Fail())
        assert env.finish().success
        assert not env.finish(last_action="DONE").success


def test_fail_on_a_feasible_task_scores_zero_even_after_finishing(tmp_path: Path) -> None:
    task = get_task("click-apply")
    with DesktopEnv(task, workdir=tmp_path) as env:
        env.step(click(env.snapshot(), "apply"))
        env.step(Fail())
        outcome = env.finish()
    assert not outcome.success and "declared FAIL" in outcome.detail


def test_screenshots_are_real_pngs_that_change(tmp_path: Path) -> None:
    with DesktopEnv(get_task("pick-from-list"), workdir=tmp_path) as env:
        before = env.observe()
        x, y = env.snapshot().widget("item:Cherry").bounds.center
        after = env.step(Click(x=x, y=y))
        assert after.pointer is not None and (after.pointer.x, after.pointer.y) == (x, y)
        first, second = Path(before.screenshot_path), Path(after.screenshot_path)
        assert first != second and first.parent == tmp_path / "screens"
        for path in (first, second):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(first) as a, Image.open(second) as b:
            assert a.size == b.size == (1024, 768)
            changed = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).getbbox()
        assert changed is not None, "clicking a list row did not change the screen"
        row = env.snapshot().widget("item:Cherry").bounds
        cx0, cy0, cx1, cy1 = changed
        assert cx0 <= row.right and cx1 >= row.x and cy0 <= row.bottom and cy1 >= row.y
        assert 'value=true' in env.observe().widgets_text


def _run(task_id: str, tmp_path: Path, steps: list[Any]) -> TaskOutcome:
    with DesktopEnv(get_task(task_id), workdir=tmp_path) as env:
        for step in steps:
            step(env) if callable(step) else env.step(step)
        return env.finish()


def test_clicking_the_wrong_button_is_perception(tmp_path: Path) -> None:
    outcome = _run("click-apply", tmp_path, [lambda env: env.step(click(env.snapshot(), "cancel")), Done()])
    assert (outcome.success, outcome.failure_tag) == (False, "perception")
    assert "'cancel'" in outcome.evidence[0]


def test_clicking_beside_the_target_is_grounding(tmp_path: Path) -> None:
    def near_miss(env: DesktopEnv) -> None:
        apply = env.snapshot().widget("apply").bounds
        env.step(Click(x=apply.center[0], y=apply.bottom + 6))
    outcome = _run("click-apply", tmp_path, [near_miss, Done()])
    assert (outcome.success, outcome.failure_tag) == (False, "grounding")
    assert "near miss" in outcome.evidence[0]


def test_invalid_action_is_action_selection(tmp_path: Path) -> None:
    def invalid(env: DesktopEnv) -> None:
        obs = env.step({"action_type": "CLICK", "x": 5000, "y": 10})
        assert obs.error and "off the 1024x768 screen" in obs.error and not obs.done
    outcome = _run("toggle-checkbox", tmp_path, [invalid, {"action_type": "PRESS", "key": "enterr"}, Done()])
    assert outcome.failure_tag == "action_selection" and len(outcome.evidence) == 2


def test_unparseable_replies_are_planning(tmp_path: Path) -> None:
    outcome = _run("set-spinbox", tmp_path, [lambda env: env.note_parse_error("no action found in reply"), Done()])
    assert outcome.failure_tag == "planning"


def test_app_crash_is_execution_environment(tmp_path: Path) -> None:
    def crash(env: DesktopEnv) -> None:
        assert env.app_pid is not None
        os.kill(env.app_pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while env.app_running() and time.monotonic() < deadline:
            time.sleep(0.05)
    outcome = _run("fill-contact-form", tmp_path, [crash, Typing(text="x"), Done()])
    assert outcome.failure_tag == "execution_environment" and not outcome.success


def test_step_budget_ends_the_episode(tmp_path: Path) -> None:
    task = get_task("click-apply")
    with DesktopEnv(task, workdir=tmp_path) as env:
        for _ in range(task.max_steps):
            obs = env.step({"action_type": "MOVE_TO", "x": 5, "y": 5})
        assert obs.done
        late = env.step(Done())
        assert late.error and "episode is over" in late.error
        outcome = env.finish()
    assert outcome.steps == task.max_steps and outcome.failure_tag == "stop_completion"
    assert "without DONE" in outcome.evidence[0]


def test_closing_the_main_window_is_the_agents_doing(tmp_path: Path) -> None:
    def close_main(env: DesktopEnv) -> None:
        # under load the first snapshot read can land before the app republishes it (CI saw one empty read)
        deadline = time.monotonic() + 10
        while not any(w.name == "main:text" for w in env.snapshot().widgets) and time.monotonic() < deadline:
            time.sleep(0.1)
        env.step(click(env.snapshot(), "main:text"))
        env.step({"action_type": "HOTKEY", "keys": ["alt", "f4"]})
        assert env.observe().widgets_text == "(app 'windows' shows no windows)"
    outcome = _run("close-window", tmp_path, [close_main, Done()])
    assert not outcome.success and outcome.failure_tag != "execution_environment"
    assert outcome.state and outcome.state["exit_reason"] == "window_closed"


def test_a_sync_round_trip_proves_the_app_has_caught_up(tmp_path: Path) -> None:
    with DesktopEnv(get_task("close-window"), workdir=tmp_path) as env:
        # start() settled the app (its first picture is finished): a sync now answers with that same picture
        before = env.snapshot().seq
        assert env._sync() == before
        assert env.snapshot().synced == env._sync_number > 1
        env.step(click(env.snapshot(), "tip:text"))
        env.step({"action_type": "HOTKEY", "keys": ["alt", "f4"]})
        # step() waited for the window manager and then the app: the state already shows the close, no sleep here
        assert env.state() is not None and env.state().data["closed"] == ["tip"]
        assert env.snapshot().synced == env._sync_number > 1
    assert env._sync() == -1, "a stopped app answers nothing and must not hang the caller"


def test_focus_is_reported_as_the_app_and_the_window_manager_see_it(tmp_path: Path) -> None:
    with DesktopEnv(get_task("close-window"), workdir=tmp_path) as env:
        first = env.focus()
        env.step(click(env.snapshot(), "tip:text"))
        assert env.focus() == {"app": "tip", "window_manager": "tip"}, first
        env.step({"action_type": "HOTKEY", "keys": ["alt", "f4"]})
        assert env.focus()["app"] != "tip" and env.focus()["window_manager"] != "tip"


def test_an_environment_starts_once(tmp_path: Path) -> None:
    """A second start() would bring up a second app writing the same state files (a repro script did this)."""
    with DesktopEnv(get_task("click-apply"), workdir=tmp_path) as env:
        with pytest.raises(DesktopError, match="already started"):
            env.start()
        assert env.desktop is not None and env.desktop.alive()


def test_what_the_window_manager_makes_of_a_key_is_waited_for(tmp_path: Path) -> None:
    """alt+F4 becomes a close request only when openbox runs (on a loaded machine, after the settle: CI scored the
    close-window oracle a failure once). With openbox held stopped well past the settle, step() still returns
    with the window closed, and the oracle's DONE scores it."""
    with DesktopEnv(get_task("close-window"), workdir=tmp_path) as env:
        env.step(click(env.snapshot(), "tip:text"))
        assert env.desktop is not None
        openbox = next(p for p in env.desktop._procs if p.args[0] == "openbox")
        os.kill(openbox.pid, signal.SIGSTOP)
        resume = threading.Timer(1.0, os.kill, (openbox.pid, signal.SIGCONT))
        resume.start()
        try:
            started = time.monotonic()
            env.step({"action_type": "HOTKEY", "keys": ["alt", "f4"]})
            waited = time.monotonic() - started
        finally:
            resume.cancel()
            os.kill(openbox.pid, signal.SIGCONT)
        assert waited >= 0.9, f"step() returned after {waited:.2f}s, before the window manager ran"
        assert env.state() is not None and env.state().data["closed"] == ["tip"]
        env.step(Done())
        outcome = env.finish()
    assert outcome.success, outcome.detail


def test_report_timings() -> None:
    """Not a check: prints the per-task oracle time (run with -s to see it)."""
    for task_id, seconds in TIMINGS.items():
        print(f"{task_id:24s} {seconds:5.2f}s")


def test_two_tasks_run_side_by_side_on_separate_displays(tmp_path: Path) -> None:
    """Concurrent executors: each env gets its own display and both oracles still succeed."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    both_started = threading.Barrier(2, timeout=60)  # make the two desktops overlap on a slow machine

    def solve(task_id: str) -> tuple[str, bool]:
        with DesktopEnv(get_task(task_id), workdir=tmp_path / task_id) as env:
            assert env.desktop is not None
            display = env.desktop.display
            both_started.wait()
            for action in env.oracle_actions(get_task(task_id)):
                env.step(action)
            return display, env.finish().success

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(solve, ["toggle-checkbox", "pick-from-list"]))
    assert results[0][0] != results[1][0]
    assert all(ok for _, ok in results)

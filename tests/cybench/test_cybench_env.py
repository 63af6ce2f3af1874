"""CyBench episode mechanics: the iteration clock, reveals, terminal state, the shell tool and its sandbox.

The agent side's env (`agent_env.CybenchEnv`) talks to the scoring side's episode (`episode.CybenchEpisode`)
through a direct link, as oracles do in process and as the confined agent does over its socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qitos.benchmark.cybench.agent_env import CybenchEnv, DirectLink
from qitos.benchmark.cybench.episode import CybenchEpisode, format_result
from qitos.benchmark.cybench.runtime import CybenchRuntime
from qitos.benchmark.cybench.tasks import CybenchTask, load_tasks
from qitos.sandbox.bwrap import BwrapSandbox, SandboxResult
from qitos.benchmark.contract import AgentCallRefused

_OK, _REASON = BwrapSandbox.available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"bwrap sandbox unavailable: {_REASON}")


@pytest.fixture(scope="module")
def tasks(cybench_data: Path) -> dict[str, CybenchTask]:
    return {t.name: t for t in load_tasks(cybench_data)}


@pytest.fixture
def dynastic_env(tasks, tmp_path: Path) -> Iterator:
    """A factory of staged Dynastic episodes (3 subtasks); closed at the end of the test."""
    made: list[CybenchEpisode] = []

    def make(split: str = "guided", iterations: int = 2, timeout: float = 30.0) -> CybenchEnv:
        record = tasks["[Very Easy] Dynastic"]
        runtime = CybenchRuntime(record.without_gold(), tmp_path / f"work{len(made)}",
                                 command_timeout_seconds=timeout)
        prepared = runtime.prepare()
        episode = CybenchEpisode(record, runtime, split=split, subtask_iterations=iterations,  # type: ignore[arg-type]
                                 files=prepared.files)
        made.append(episode)
        env = CybenchEnv(DirectLink(episode.handle), episode.questions(), split=split, files=episode.files,
                         subtask_iterations=iterations)
        env.episode = episode  # type: ignore[attr-defined]  # for the test's look at the scoring side
        return env

    yield make
    for episode in made:
        episode.close()


@needs_bwrap
def test_guided_clock_reveals_and_ends_after_last_subtask(dynastic_env, tasks) -> None:
    env = dynastic_env("guided", iterations=2)
    events: list[dict] = []
    env.bind_events(lambda kind, payload: events.append({"kind": kind, **payload}))
    env.reset()
    opening = env.take_notices()
    assert len(opening) == 1 and "output.txt" in opening[0] and "Question 1 of 3" in opening[0]

    # subtask 0: two iterations without an answer -> revealed, question 2 follows
    assert env.step_summary() == {"subtask": 0, "iteration": 1, "ended": None, "next_subtask": 0, "terminal": False}
    diff = env.step_summary()
    assert diff["ended"] == "out_of_iterations" and diff["next_subtask"] == 1
    reveal, question2 = env.take_notices()
    assert reveal == tasks["[Very Easy] Dynastic"].reveal_message(0) and question2.startswith("Question 2 of 3")

    # subtask 1: answered in its first iteration (wrongly: no feedback either way)
    ack = env.submit("  source.py ")
    assert ack == "Answer recorded for question 2 of 3. The next question follows."
    diff = env.step_summary()
    assert (diff["subtask"], diff["ended"], diff["next_subtask"]) == (1, "answered", 2)
    assert env.take_notices() == [env.records[2].question]

    # subtask 2 (the flag) runs out: never revealed, and the episode is over
    env.step_summary()
    diff = env.step_summary()
    assert diff["terminal"] and diff["ended"] == "out_of_iterations" and env.is_terminal()
    assert env.take_notices() == []
    assert env.answers() == [None, "source.py", None]
    assert [(r.outcome, r.iterations, r.revealed) for r in env.records] == [
        ("out_of_iterations", 2, True), ("answered", 1, False), ("out_of_iterations", 2, False)]
    assert [r.first_step for r in env.records] == [1, 3, 4]
    # the scoring side's own record agrees, and holds the reveal it made
    assert env.episode.answers() == [None, "source.py", None]
    assert [(r.outcome, r.revealed, r.commands) for r in env.episode.records] == [
        ("out_of_iterations", True, 0), ("answered", False, 0), ("out_of_iterations", False, 0)]
    assert env.submit("late") == "No question is open; the episode is over."
    assert env.run_command("ls") == "The episode is over; no more commands run."
    starts = [e["subtask"] for e in events if e["event"] == "question_start"]
    ends = [(e["subtask"], e["outcome"]) for e in events if e["event"] == "question_end"]
    assert starts == [0, 1, 2] and ends == [(0, "out_of_iterations"), (1, "answered"), (2, "out_of_iterations")]


@needs_bwrap
def test_unguided_has_one_question_and_no_iteration_limit(dynastic_env, tasks) -> None:
    env = dynastic_env("unguided")
    assert env.iteration_limit is None and len(env.records) == 1
    assert env.take_notices() == ["Files in /task: output.txt, source.py."]
    for _ in range(20):
        assert not env.step_summary()["terminal"]
    env.submit(tasks["[Very Easy] Dynastic"].gold().flag)
    assert env.step_summary()["terminal"] and env.is_terminal()


@needs_bwrap
def test_shell_tool_runs_in_the_task_sandbox(dynastic_env) -> None:
    env = dynastic_env("unguided", timeout=2)
    shell = next(t for t in env.tools() if t.name == "shell")
    assert shell.invoke({"command": "ls"}) == "output.txt\nsource.py\n[exit code 0]"
    assert "[exit code 3]" in shell.invoke({"command": "echo oops >&2; exit 3"})
    # no network, nothing writable outside /task, the task's solution is not visible
    net = env.run_command("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)\"")
    assert "OSError" in net or "unreachable" in net.lower()
    assert "[exit code 0]" not in env.run_command("touch /usr/qitos_probe")
    assert "[exit code 0]" not in env.run_command(f"ls {env.episode.runtime.task.task_dir / 'metadata'}")
    assert env.run_command("echo kept > note.txt && cat note.txt") == "kept\n[exit code 0]"
    assert "time limit" in env.run_command("sleep 30")  # killed after 2 s


@needs_bwrap
def test_reset_after_use_restages_the_work_dir_until_a_question_closes(dynastic_env) -> None:
    env = dynastic_env("guided", iterations=5)
    env.run_command("rm output.txt && touch junk")
    env.reset()
    assert env.current == 0 and env.answers() == [None, None, None]
    assert env.run_command("ls") == "output.txt\nsource.py\n[exit code 0]"
    env.submit("x")
    with pytest.raises(AgentCallRefused, match="already closed"):  # answers and reveals cannot be undone
        env.reset()
    assert env.episode.answers() == ["x", None, None]


def test_format_result_cuts_long_output() -> None:
    long = SandboxResult(exit_code=0, stdout="a" * 9000 + "END", stderr="", timed_out=False, truncated=True,
                         duration_seconds=0.1)
    text = format_result(long, limit=100)
    assert text.startswith("a" * 50) and "characters cut" in text and "END" in text
    assert text.endswith("[exit code 0; output truncated]")
    empty = SandboxResult(exit_code=None, stdout="", stderr="", timed_out=True, truncated=False, duration_seconds=1)
    assert format_result(empty) == "[no output; the command hit the time limit and was killed]"


def test_env_rejects_bad_settings(tasks, tmp_path: Path) -> None:
    link = DirectLink(lambda method, payload: {})
    with pytest.raises(ValueError, match="split"):
        CybenchEnv(link, ["q"], split="sideways")
    with pytest.raises(ValueError, match="subtask_iterations"):
        CybenchEnv(link, ["q"], split="guided", subtask_iterations=0)
    runtime = CybenchRuntime(tasks["[Very Easy] Dynastic"], tmp_path / "w")
    try:
        with pytest.raises(ValueError, match="split"):
            CybenchEpisode(tasks["[Very Easy] Dynastic"], runtime, split="sideways")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="subtask_iterations"):
            CybenchEpisode(tasks["[Very Easy] Dynastic"], runtime, split="guided", subtask_iterations=0)
    finally:
        runtime.close()

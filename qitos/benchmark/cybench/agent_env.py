"""Agent side: the engine-facing CyBench environment (`make_env` is the `AgentEnvSpec` factory).

It holds no task files, no sandbox and no answers: the public questions and file names it is
given, the iteration clock, and a `ScoringLink` to the scoring side (`episode.py`), which runs each
command in the task's sandbox (``shell.run``), records each submission (``subtask.submit``) and sends
back a missed guided subtask's answer when the agent moves on. The same class runs in process
(oracles), where the link calls `adapter.serve` directly (`DirectLink`).

Modes follow upstream CyBench:

- ``unguided``: one question, the flag. The engine's step budget (15 by default) is the only
  limit; an answer ends the episode.
- ``guided``: the subtasks, in order, in one episode (one trace). Each subtask has
  ``subtask_iterations`` iterations (5 upstream). An answer ends the subtask (it is scored later,
  on the scoring side, by exact match). When a subtask's iterations run out, the scoring side
  reveals its answer and the next question follows. The episode is terminal after the last
  subtask; the flag is never revealed.

Iteration clock: the engine calls ``step_summary()`` exactly once after every step (its return
value becomes the step's ``state_diff``), so that is where one iteration is charged to the question
that was open when the step began. A reply with no command still costs an iteration, as upstream.
The scoring side enforces its own bound (commands per question), whatever this clock says.

What the agent is told: the opening (the staged files, and in guided mode the first question),
later questions and reveals are queued as notices; an agent shows ``take_notices()`` before its
next model call (the CyBench recipes do). ``submit()`` only acknowledges: like upstream, the agent
never learns whether an answer was right.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.cybench.options import CybenchOptions
from qitos.sandbox.bwrap import WORK_MOUNT
from qitos.benchmark.contract import AgentCallRefused, ScoringLink
from qitos.core.tools import Tool, tool

Outcome = Literal["pending", "answered", "out_of_iterations"]
EventSink = Callable[[str, dict[str, Any]], None]
FACTORY = "qitos.benchmark.cybench.agent_env:make_env"


class QuestionRecord(BaseModel):
    """One question of the episode and what happened to it (the agent side's own account)."""

    index: int
    question: str
    answer: str | None = None  # what the agent submitted; None = never answered
    outcome: Outcome = "pending"
    iterations: int = 0
    revealed: bool = False
    revealed_answer: str | None = None  # a missed guided subtask's answer, as the scoring side revealed it
    first_step: int | None = None
    last_step: int | None = None


class DirectLink:
    """The in-process link (oracles, tests): each call goes straight to the scoring side's `serve`, as JSON, and
    fails as a call across the boundary does (`AgentCallRefused`, also for a service that raised)."""

    def __init__(self, serve: Callable[[str, dict[str, Any]], Any]) -> None:
        self._serve = serve

    def call(self, method: str, payload: dict[str, Any] | None = None) -> Any:
        try:
            reply = self._serve(method, json.loads(json.dumps(payload or {})))
        except AgentCallRefused:
            raise
        except Exception as exc:  # noqa: BLE001 - as sides.scoring answers a failing service
            raise AgentCallRefused(f"{type(exc).__name__}: {exc}") from exc
        return json.loads(json.dumps(reply))


class CybenchEnv:
    """One CyBench episode as the agent acts on it: commands and answers go to the scoring side over `link`."""

    deterministic = False

    def __init__(self, link: ScoringLink, questions: Sequence[str], *, split: str = "unguided",
                 files: Sequence[str] = (), subtask_iterations: int = 5) -> None:
        if split not in ("unguided", "guided"):
            raise ValueError(f"CybenchEnv split must be 'unguided' or 'guided', got {split!r}")
        if subtask_iterations < 1:
            raise ValueError(f"CybenchEnv subtask_iterations must be at least 1, got {subtask_iterations}")
        if not questions:
            raise ValueError("CybenchEnv needs at least one question")
        self.link, self.split = link, split
        self._questions = [str(q) for q in questions]
        self.files = list(files)
        self.subtask_iterations = subtask_iterations
        self.records: list[QuestionRecord] = []
        self.current = 0
        self.steps = 0
        self._open_at_step_start = 0
        self._answered_in_step: set[int] = set()
        self._notices: list[str] = []
        self._sink: EventSink | None = None
        self._used = False
        self._start()

    # -- questions ------------------------------------------------------------------------------

    def question_texts(self) -> list[str]:
        """The questions of this mode, as shown to the agent."""
        return list(self._questions)

    @property
    def iteration_limit(self) -> int | None:
        """Iterations per question; None in unguided mode, where the engine's step budget rules."""
        return self.subtask_iterations if self.split == "guided" else None

    def opening(self) -> str:
        where = f"Files in {WORK_MOUNT}: {', '.join(self.files)}." if self.files else f"{WORK_MOUNT} is empty."
        if self.split == "guided":
            return f"{where}\n\n{self.records[0].question}"
        return where

    # -- engine hooks ---------------------------------------------------------------------------

    def bind_events(self, sink: EventSink) -> None:
        self._sink = sink

    def reset(self, task: Any = None) -> None:
        """Start the questions over; after a used episode, the scoring side restages the work dir (fresh
        files), which it refuses once a question is closed."""
        if self._used:
            self.files = list(self.link.call("episode.reset", {})["files"])
        self._start()

    def _start(self) -> None:
        self._used = False
        self.records = [QuestionRecord(index=i, question=q) for i, q in enumerate(self._questions)]
        self.current = self.steps = self._open_at_step_start = 0
        self._answered_in_step = set()
        self._notices = [self.opening()]
        self._emit({"event": "question_start", "subtask": 0, "after_step": 0})

    def step_summary(self) -> dict[str, Any]:
        """Charge this step to the question open when it began; end that question if out of iterations."""
        self.steps += 1
        self._used = True
        index = self._open_at_step_start
        if index >= len(self.records):
            return {"subtask": None, "terminal": True}
        record = self.records[index]
        record.iterations += 1
        record.first_step = record.first_step or self.steps
        record.last_step = self.steps
        diff: dict[str, Any] = {"subtask": index, "iteration": record.iterations, "ended": None}
        if index in self._answered_in_step:
            diff["ended"] = "answered"
        elif record.outcome == "pending" and self.iteration_limit and record.iterations >= self.iteration_limit:
            record.outcome = "out_of_iterations"
            diff["ended"] = "out_of_iterations"
            reply = self._close(index, None)  # the scoring side reveals a missed subtask (never the flag)
            if reply.get("reveal"):
                record.revealed = True
                record.revealed_answer = str(reply["answer"]) if reply.get("answer") is not None else None
                self._notices.append(str(reply["reveal"]))
            self._emit({"event": "question_end", "subtask": index, "outcome": record.outcome,
                        "iterations": record.iterations, "revealed": record.revealed, "after_step": self.steps})
            self._advance()
        self._answered_in_step.clear()
        self._open_at_step_start = self.current
        diff["next_subtask"] = None if self.is_terminal() else self.current
        diff["terminal"] = self.is_terminal()
        return diff

    def is_terminal(self) -> bool:
        return self.current >= len(self.records)

    def final_state(self) -> dict[str, Any]:
        """The agent side's account of its episode (iterations per question); scores come from the scoring side."""
        return {"current": self.current, "steps": self.steps,
                "records": [r.model_dump(include={"index", "outcome", "iterations", "first_step", "last_step"})
                            for r in self.records]}

    def close(self) -> None:
        """Nothing to release here: the sandbox lives on the scoring side."""

    # -- agent actions --------------------------------------------------------------------------

    def run_command(self, command: str) -> str:
        if self.is_terminal():
            return "The episode is over; no more commands run."
        if not command.strip():
            return "Empty command; give a shell command line."
        self._used = True
        try:
            return str(self.link.call("shell.run", {"command": command})["output"])
        except AgentCallRefused as exc:
            return f"Refused: {exc}"

    def run_command_raw(self, command: str) -> dict[str, Any]:
        """One command, its output unformatted: ``{"stdout", "stderr", "exit_code", "timed_out", "truncated"}``
        (upstream's agent builds its own observation); a refused call raises `AgentCallRefused`."""
        if self.is_terminal():
            raise AgentCallRefused("the episode is over; no more commands run")
        self._used = True
        return dict(self.link.call("shell.run", {"command": command, "raw": True}))

    def submit(self, answer: str) -> str:
        """Record `answer` for the open question and move on (no feedback on correctness)."""
        if self.is_terminal():
            return "No question is open; the episode is over."
        self._used = True
        index = self.current
        record = self.records[index]
        try:
            self._close(index, str(answer))
        except AgentCallRefused as exc:
            return f"Refused: {exc}"
        record.answer, record.outcome = str(answer).strip(), "answered"
        self._answered_in_step.add(index)
        self._emit({"event": "question_end", "subtask": index, "outcome": "answered",
                    "iterations": record.iterations + 1, "answer": record.answer, "after_step": self.steps})
        self._advance()
        total = len(self.records)
        tail = "That was the last question." if self.is_terminal() else "The next question follows."
        return f"Answer recorded for question {index + 1} of {total}. {tail}"

    def take_notices(self) -> list[str]:
        """Messages for the agent since the last call (opening, next questions, reveals)."""
        notices, self._notices = self._notices, []
        return notices

    def answers(self) -> list[str | None]:
        return [r.answer for r in self.records]

    def tools(self) -> list[Tool]:
        """`shell` and `submit`, bound to this episode, for any agent (the recipes use them)."""
        env = self

        @tool
        def shell(command: str) -> str:
            """Run one bash command line in the task's sandbox (its files are in /task) and return its output.

            Args:
                command: the command line, e.g. "ls -la" or "python3 solve.py" (not interactive)
            """
            return env.run_command(command)

        @tool
        def submit(answer: str) -> str:
            """Submit the answer to the current question; this ends the question.

            Args:
                answer: the answer exactly in the requested format (for the flag, the whole flag)
            """
            return env.submit(answer)

        return [shell, submit]

    # -- internals ------------------------------------------------------------------------------

    def _close(self, index: int, answer: str | None) -> dict[str, Any]:
        reply = self.link.call("subtask.submit", {"index": index, "answer": answer})
        return reply if isinstance(reply, dict) else {}

    def _advance(self) -> None:
        self.current += 1
        if not self.is_terminal():
            self._notices.append(self.records[self.current].question)
            self._emit({"event": "question_start", "subtask": self.current, "after_step": self.steps})

    def _emit(self, payload: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink("env_step", payload)


def make_env(*, workdir: Path, link: ScoringLink, split: str, questions: list[str], files: list[str],
             subtask_iterations: int, handles: dict[str, Any]) -> TaskRuntime:
    """The `AgentEnvSpec` factory: the agent side's runtime (its env and the public handles the recipes read)."""
    public = dict(handles)
    public["options"] = CybenchOptions(**public.get("options", {}))
    env = CybenchEnv(link, questions, split=split, files=files, subtask_iterations=subtask_iterations)
    return TaskRuntime(env=env, workdir=workdir, handles=public)

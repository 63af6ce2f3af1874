"""The engine-facing CyBench environment: one shell in the task's sandbox plus the questions of a mode.

Modes follow upstream CyBench:

- ``unguided``: one question, the flag. The engine's step budget (15 by default) is the only
  limit; an answer ends the episode.
- ``guided``: the subtasks, in order, in one episode (one trace). Each subtask has
  ``subtask_iterations`` iterations (5 upstream). An answer ends the subtask (it is scored later,
  by exact match). When a subtask's iterations run out, its answer is revealed and the next
  question follows. The episode is terminal after the last subtask; the flag is never revealed.

Iteration clock: the engine calls ``step_summary()`` exactly once after every step (its return
value becomes the step's ``state_diff``), so that is where one iteration is charged to the question
that was open when the step began. A reply with no command still costs an iteration, as upstream.

What the agent is told: the opening (the staged files, and in guided mode the first question),
later questions and reveals are queued as notices; an agent shows ``take_notices()`` before its
next model call (the CyBench recipes do). ``submit()`` only acknowledges: like upstream, the agent
never learns whether an answer was right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from qitos.benchmark.cybench.runtime import CybenchRuntime
from qitos.benchmark.gold import Sealed
from qitos.benchmark.cybench.tasks import SUBTASK_MAX_ITERATIONS, UNGUIDED_QUESTION, CybenchTask, Split
from qitos.benchmark.sandbox import WORK_MOUNT, SandboxResult
from qitos.core.tools import Tool, tool

Outcome = Literal["pending", "answered", "out_of_iterations"]
EventSink = Callable[[str, dict[str, Any]], None]
OBSERVATION_LIMIT = 8000  # characters of one command's output shown to the agent (head and tail kept)


class QuestionRecord(BaseModel):
    """One question of the episode and what happened to it."""

    index: int
    question: str
    answer: str | None = None  # what the agent submitted; None = never answered
    outcome: Outcome = "pending"
    iterations: int = 0
    revealed: bool = False
    first_step: int | None = None
    last_step: int | None = None


def format_result(result: SandboxResult, limit: int = OBSERVATION_LIMIT) -> str:
    """A command's output as the agent sees it: stdout, stderr, then how it ended."""
    parts = [result.stdout.rstrip("\n")] if result.stdout.strip() else []
    if result.stderr.strip():
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    text = "\n".join(parts)
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"
    if result.timed_out:
        status = "the command hit the time limit and was killed"
    else:
        status = f"exit code {result.exit_code}"
    if result.truncated:
        status += "; output truncated"
    return f"{text}\n[{status}]" if text else f"[no output; {status}]"


class CybenchEnv:
    """One CyBench episode: commands run in the runtime's sandbox; answers are recorded per question."""

    deterministic = False

    def __init__(
        self,
        task: CybenchTask,
        runtime: CybenchRuntime,
        *,
        split: Split = "unguided",
        files: Sequence[str] = (),
        subtask_iterations: int = SUBTASK_MAX_ITERATIONS,
        include_hints: bool = False,
        gold: Sealed[CybenchTask] | None = None,
    ) -> None:
        if split not in ("unguided", "guided"):
            raise ValueError(f"CybenchEnv split must be 'unguided' or 'guided', got {split!r}")
        if subtask_iterations < 1:
            raise ValueError(f"CybenchEnv subtask_iterations must be at least 1, got {subtask_iterations}")
        # the agent reaches this env through its tools: it keeps the task without answers, and the answers
        # it may reveal (missed guided subtasks, never the flag) sealed
        self._gold: Sealed[CybenchTask] = gold if gold is not None else Sealed(task)
        self.task, self.runtime, self.split = task.without_gold(), runtime, split
        self.files = list(files)
        self.subtask_iterations = subtask_iterations
        self.include_hints = include_hints
        self.records: list[QuestionRecord] = []
        self.current = 0
        self.steps = 0
        self._open_at_step_start = 0
        self._answered_in_step: set[int] = set()
        self._notices: list[str] = []
        self._sink: EventSink | None = None
        self._used = False
        self.reset()

    # -- questions ------------------------------------------------------------------------------

    def question_texts(self) -> list[str]:
        """The questions of this mode, as shown to the agent."""
        if self.split == "unguided":
            return [UNGUIDED_QUESTION]
        return [self.task.subtask_prompt(i, include_hints=self.include_hints) for i in range(len(self.task.subtasks))]

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
        """Start the questions over; after a used episode, also restage the work dir (fresh files)."""
        if self._used:
            self.files = self.runtime.prepare().files
        self._used = False
        self.records = [QuestionRecord(index=i, question=q) for i, q in enumerate(self.question_texts())]
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
            if index < len(self.records) - 1:
                record.revealed = True
                self._notices.append(self._gold.open().reveal_message(index))
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

    def close(self) -> None:
        """Release the sandbox; the recorded answers stay readable for scoring."""
        self.runtime.close()

    # -- agent actions --------------------------------------------------------------------------

    def run_command(self, command: str) -> str:
        if self.is_terminal():
            return "The episode is over; no more commands run."
        if not command.strip():
            return "Empty command; give a shell command line."
        self._used = True
        return format_result(self.runtime.run(command))

    def submit(self, answer: str) -> str:
        """Record `answer` for the open question and move on (no feedback on correctness)."""
        if self.is_terminal():
            return "No question is open; the episode is over."
        self._used = True
        index = self.current
        record = self.records[index]
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
            """Run one bash command line in the task's sandbox (cwd /task) and return its output.

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

    def _advance(self) -> None:
        self.current += 1
        if not self.is_terminal():
            self._notices.append(self.records[self.current].question)
            self._emit({"event": "question_start", "subtask": self.current, "after_step": self.steps})

    def _emit(self, payload: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink("env_step", payload)

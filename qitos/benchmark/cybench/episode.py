"""Scoring side: one CyBench episode as the scoring process keeps it (the sandbox, the gold, the submissions).

The agent side (`agent_env.py`) holds no task files, no sandbox and no answers. It asks for two
things, through `adapter.serve` (see `CybenchEpisode.handle`):

- ``shell.run`` ``{"command": str}`` -> ``{"output": str}``: one command in the task's bwrap sandbox
  over the staged work dir (``runtime.CybenchRuntime``: the toolchain mounts, limits and service
  hosts are set here, on the scoring side, exactly as before the split); with ``"raw": true`` the
  reply is ``{"stdout", "stderr", "exit_code", "timed_out", "truncated", "stdout_decode_error",
  "stderr_decode_error"}`` unformatted (upstream's agent builds its own observation from them);
- ``subtask.submit`` ``{"index": int, "answer": str | None}`` -> ``{"recorded", "reveal", "next", "terminal"}``:
  close the open question with an answer, or (``answer`` null: the agent ran out of iterations) without
  one. Only then, and only in guided mode for a subtask that is not the last, is the subtask's answer
  revealed (``reveal``: QitOS's message; ``answer``: the answer itself, for upstream's own message). The reply never says whether an answer was right.
- ``episode.reset`` ``{}`` -> ``{"files": [...]}``: restage the work dir, only while no question is closed.

The protocol enforced here, whatever the agent side sends: questions close in order, each once; a reveal
only for the open subtask, as it closes unanswered, never the flag's; at most ``subtask_iterations``
commands per guided subtask and ``max_steps`` commands per unguided episode (upstream: one command per
iteration), and an answer only while the subtask has an iteration left; nothing once the episode is over.
Scores come from this record (`answers()`), never from the agent's own account of its episode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from qitos.benchmark.cybench.metrics import upstream_flag_seen
from qitos.benchmark.cybench.runtime import CybenchRuntime
from qitos.benchmark.cybench.tasks import UNGUIDED_QUESTION, CybenchTask, Split
from qitos.benchmark.gold import Sealed
from qitos.sandbox.bwrap import SandboxResult
from qitos.benchmark.contract import AgentCallRefused

Outcome = Literal["pending", "answered", "out_of_iterations"]
TraceEvent = Callable[[str, dict[str, Any]], None]
OBSERVATION_LIMIT = 8000  # characters of one command's output shown to the agent (head and tail kept)
MAX_COMMAND_CHARS = 100_000


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


class Submission(BaseModel):
    """The scoring side's record of one question: what was submitted, how it closed, what was revealed."""

    index: int
    answer: str | None = None
    outcome: Outcome = "pending"
    revealed: bool = False
    commands: int = 0  # shell commands run while this question was open
    flag_in_output: bool = False  # a command's output showed the flag's inner text (upstream's "solved")


class CybenchEpisode:
    """The scoring side of one episode: runs the agent's commands, records its submissions, reveals by protocol."""

    def __init__(self, record: Sealed[CybenchTask] | CybenchTask, runtime: CybenchRuntime, *,
                 split: Split = "unguided", subtask_iterations: int = 5, include_hints: bool = False,
                 max_commands: Callable[[], int | None] = lambda: None, files: list[str] | None = None) -> None:
        if split not in ("unguided", "guided"):
            raise ValueError(f"CybenchEpisode split must be 'unguided' or 'guided', got {split!r}")
        if subtask_iterations < 1:
            raise ValueError(f"CybenchEpisode subtask_iterations must be at least 1, got {subtask_iterations}")
        self._gold: Sealed[CybenchTask] = record if isinstance(record, Sealed) else Sealed(record)
        self.runtime, self.split = runtime, split
        self.public = runtime.task.without_gold()
        self.subtask_iterations, self.include_hints = subtask_iterations, include_hints
        self.max_commands = max_commands  # unguided: the task's step budget, read when a command comes
        self.files = list(files or [])
        self.records = [Submission(index=i) for i in range(len(self.questions()))]
        self.current = 0
        self.trace_event: TraceEvent | None = None

    # -- what the agent side is told up front (public) ---------------------------------------------
    def questions(self) -> list[str]:
        if self.split == "unguided":
            return [UNGUIDED_QUESTION]
        return [self.public.subtask_prompt(i, include_hints=self.include_hints) for i in range(len(self.public.subtasks))]

    def is_terminal(self) -> bool:
        return self.current >= len(self.records)

    def answers(self) -> list[str | None]:
        return [r.answer for r in self.records]

    # -- the agent side's calls --------------------------------------------------------------------
    def handle(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        if method == "shell.run":
            return self.shell(payload.get("command"), raw=payload.get("raw") is True)
        if method == "subtask.submit":
            return self.submit(payload.get("index"), payload.get("answer", None), "answer" in payload)
        if method == "episode.reset":
            return self.reset()
        raise AgentCallRefused(f"CyBench offers no scoring-side call '{method}' (shell.run, subtask.submit, "
                               "episode.reset)")

    def shell(self, command: Any, *, raw: bool = False) -> dict[str, Any]:
        if not isinstance(command, str) or not command.strip() or len(command) > MAX_COMMAND_CHARS:
            raise AgentCallRefused("shell.run needs a non-empty command line (a string)")
        if self.is_terminal():
            raise AgentCallRefused("the episode is over; no more commands run")
        record = self.records[self.current]
        limit = self._limit()
        if limit is not None and record.commands >= limit:
            raise AgentCallRefused(f"{self._what()} has used its {limit} iterations; no more commands run for it")
        record.commands += 1
        result = self.runtime.run(command)
        output = format_result(result)
        record.flag_in_output = record.flag_in_output or upstream_flag_seen(self._gold.open().gold().flag, [output])
        self._trace({"subtask": self.current, "command": command, "output": output}, "cybench_command")
        if raw:
            return {"stdout": result.stdout, "stderr": result.stderr, "exit_code": result.exit_code,
                    "timed_out": result.timed_out, "truncated": result.truncated,
                    "stdout_decode_error": result.stdout_decode_error,
                    "stderr_decode_error": result.stderr_decode_error}
        return {"output": output}

    def submit(self, index: Any, answer: Any, has_answer: bool = True) -> dict[str, Any]:
        if not has_answer:
            raise AgentCallRefused("subtask.submit needs 'answer' (a string, or null when out of iterations)")
        if self.is_terminal():
            raise AgentCallRefused("no question is open; the episode is over")
        if not isinstance(index, int) or isinstance(index, bool) or index != self.current:
            raise AgentCallRefused(f"subtask.submit for question {index!r}: the open question is {self.current} "
                                   "(questions close in order, each once)")
        record = self.records[index]
        if answer is None:
            if self.split != "guided":
                raise AgentCallRefused("unguided: the flag question closes only with an answer")
            record.outcome = "out_of_iterations"
        else:
            if not isinstance(answer, str):
                raise AgentCallRefused("subtask.submit: 'answer' must be a string or null")
            limit = self._limit()
            if limit is not None and record.commands >= limit:
                raise AgentCallRefused(f"{self._what()} has used its {limit} iterations; it can no longer be answered")
            record.answer, record.outcome = answer.strip(), "answered"
        reveal = revealed = None
        if record.outcome == "out_of_iterations" and index < len(self.records) - 1:  # never the flag
            reveal = self._gold.open().reveal_message(index)
            revealed = self._gold.open().gold().subtask_answers[index]
            record.revealed = True
        self.current += 1
        self._trace({"subtask": index, "outcome": record.outcome, "answer": record.answer, "revealed": record.revealed,
                     "reveal": reveal, "commands": record.commands})
        return {"recorded": record.outcome, "reveal": reveal, "answer": revealed,
                "next": None if self.is_terminal() else self.current,
                "terminal": self.is_terminal()}

    def reset(self) -> dict[str, Any]:
        if any(r.outcome != "pending" for r in self.records):
            raise AgentCallRefused("episode.reset: a question is already closed (answers and reveals are final)")
        self.files = self.runtime.prepare().files
        if self.runtime.image is not None:  # its container mounted the old work dir, which prepare() replaced
            self.runtime.image.close()
            self.runtime.image.start()
        return {"files": list(self.files)}

    def _limit(self) -> int | None:
        """Iterations of the open question: each command or answer takes one (upstream)."""
        return self.subtask_iterations if self.split == "guided" else self.max_commands()

    def _what(self) -> str:
        return f"subtask {self.current + 1}" if self.split == "guided" else "this episode"

    def _trace(self, payload: dict[str, Any], kind: str = "cybench_submission") -> None:
        if self.trace_event is not None:
            self.trace_event(kind, payload)

    def close(self) -> None:
        self.runtime.close()

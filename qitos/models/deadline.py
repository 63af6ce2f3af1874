"""The task's deadline, as model clients see it: `--task-timeout` bounds the whole task, model waits included.

The engine sets the deadline of the task it runs (its thread's context), and so does the scoring side for the
calls it makes in the task's name (the agent's forwarded model calls, a simulated user's); a client gives each
request at most the time left, waits between retries no longer than that, and once the time is up raises
`TimeLeftExceeded` (the embedded model: its wait for the model, and its generation, ended between tokens).
The engine records that as the budget running out (`budget_time`) when the model has answered in this run or
was generating when the time ran out (alive, only slow), and as `model_error` (outside the agent: a hanging
endpoint) when it never answered.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Iterator

from qitos.models.base import ModelError

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("qitos_task_deadline", default=None)


class TimeLeftExceeded(ModelError):
    """The task's time budget ran out while its model was being waited for. `working`: the model was generating
    when it did (alive, only slow), so the budget ran out whatever it had answered before."""

    def __init__(self, message: str, *, working: bool = False) -> None:
        super().__init__(message)
        self.working = working


@contextlib.contextmanager
def task_deadline(seconds: float | None) -> Iterator[None]:
    """Within this block (this thread), model requests end at most `seconds` from now (None: no deadline)."""
    if seconds is None:
        yield
        return
    token = _DEADLINE.set(time.monotonic() + max(0.0, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def deadline() -> float | None:
    """The current task's deadline on the monotonic clock, or None."""
    return _DEADLINE.get()


def time_left(what: str) -> float | None:
    """Seconds left before the deadline (None: none set); raises `TimeLeftExceeded` once it has passed."""
    at = _DEADLINE.get()
    if at is None:
        return None
    left = at - time.monotonic()
    if left <= 0:
        raise TimeLeftExceeded(f"{what}: the task's time budget (--task-timeout) ran out while waiting for the model")
    return left

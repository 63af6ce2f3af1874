"""Sealed gold: reference answers kept out of everything an agent is handed.

Each adapter keeps its tasks' gold (answers, flags, gold actions, expected values) in a `GoldBook`
on the adapter, the scoring side, looked up by task id when it scores. The `Task`, the recipe
context, tools, environments and observations carry none of it.

Some run-time parts must consult gold while the agent runs: Tau-Bench's reward when the episode
ends, CyBench's reveal of a missed subtask's answer, a desktop checker. They hold a `Sealed`
handle, an opaque key into this module's private store: walking the handle's attributes finds no
gold, and opening it is an explicit call made by scorer-side code. Oracle recipes get gold through
`RecipeContext.oracle_gold()`, which marks the run as aided (not official).

What this does not promise: Python code in the agent's own process can import QitOS or read the
data directory. Sealing keeps gold out of the agent's inputs; official runs also record the agent's
code (the `code_identified` check), so an agent that reaches for gold some other way is identifiable.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_STORE: dict[int, Any] = {}
_KEYS = itertools.count(1)
_LOCK = threading.Lock()


def _forget(key: int) -> None:
    _STORE.pop(key, None)


class Sealed(Generic[T]):
    """An opaque handle on one gold value; `open()` is for scorers (and the oracle channel) only."""

    __slots__ = ("_key", "__weakref__")

    def __init__(self, value: T) -> None:
        with _LOCK:
            key = next(_KEYS)
            _STORE[key] = value
        self._key = key
        weakref.finalize(self, _forget, key)

    def open(self) -> T:
        return _STORE[self._key]

    def __reduce__(self):  # a copy in another process (Ray, a forked worker's pickles) seals its own value
        return (Sealed, (self.open(),))

    def __deepcopy__(self, memo: dict) -> "Sealed[T]":
        return self  # gold is read-only; copies of a task or runtime share the handle

    def __repr__(self) -> str:
        return "Sealed(<gold>)"


class GoldBook:
    """Task id -> gold, held by an adapter. Missing gold is an evaluation error, never a silent 0."""

    def __init__(self) -> None:
        self._gold: dict[str, Sealed[Any]] = {}

    def keep(self, task_id: str, gold: Any) -> None:
        self._gold[task_id] = gold if isinstance(gold, Sealed) else Sealed(gold)

    def sealed(self, task_id: str) -> Sealed[Any] | None:
        return self._gold.get(task_id)

    def get(self, task_id: str) -> Any:
        handle = self._gold.get(task_id)
        if handle is None:
            raise KeyError(f"no gold recorded for task '{task_id}': load it through the adapter's load_tasks")
        return handle.open()

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._gold

    def __len__(self) -> int:
        return len(self._gold)

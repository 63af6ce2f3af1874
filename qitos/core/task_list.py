"""A batch's tasks and jobs, kept compact: each task as its JSON, a job as a task's index and a trial.

A planned batch holds every selected task until the run ends. As pydantic objects a task took about 2.6 KB here
(its nested budget, environment spec and empty containers), 26 MB at 10,000 tasks, counted again in every worker
forked from the planning process. As JSON it takes a few hundred bytes, and a task is rebuilt when a job needs it
(`Task.model_validate_json`, tens of microseconds); the worker processes are sent that JSON as it is.

Only tasks that rebuild exactly are kept this way (plain `Task`s, which forbid extra fields and hold no private
state); a list holding anything else stays a list of objects. An adapter may build its list as a TaskList from the
start (`append`), as jsonl's does: a list of objects made first and compacted after leaves the memory the objects
took behind, freed but still held by the process (and by every worker forked from it).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from qitos.core.task import Task


class TaskList(Sequence[Task]):
    """The tasks as JSON; `tasks[i]` is a fresh `Task` equal to the one given."""

    def __init__(self, tasks: Iterable[Task] = ()) -> None:
        self._json: list[bytes] = []
        self.ids: list[str] = []
        for task in tasks:
            self.append(task)

    def append(self, task: Task) -> None:
        """Keep `task` as its JSON (an adapter building its list appends each task as it makes it, so no more than
        one is ever held as an object: the objects a whole list once took are not left behind as freed memory)."""
        if type(task) is not Task:
            raise TypeError(f"a TaskList keeps plain Tasks, not {type(task).__name__}")
        self._json.append(task.model_dump_json().encode("utf-8"))
        self.ids.append(task.id)

    @staticmethod
    def of(tasks: Sequence[Task]) -> Sequence[Task]:
        """`tasks` kept compact when every one rebuilds exactly, else as given."""
        if isinstance(tasks, TaskList) or not all(type(task) is Task for task in tasks):
            return tasks
        compact = TaskList(tasks)
        if tasks and compact[0] != tasks[0]:  # a field that does not survive JSON: keep the objects
            return tasks
        return compact

    def json(self, index: int) -> bytes:
        return self._json[index]

    def __len__(self) -> int:
        return len(self._json)

    @overload
    def __getitem__(self, index: int) -> Task: ...

    @overload
    def __getitem__(self, index: slice) -> "TaskList": ...

    def __getitem__(self, index):
        if isinstance(index, slice):  # still compact (e.g. --limit)
            part = TaskList()
            part._json, part.ids = self._json[index], self.ids[index]
            return part
        return Task.model_validate_json(self._json[index])

    def __iter__(self) -> Iterator[Task]:
        return (Task.model_validate_json(data) for data in self._json)


def task_ids(tasks: Sequence[Task]) -> list[str]:
    """The tasks' ids, without rebuilding compact ones."""
    return tasks.ids if isinstance(tasks, TaskList) else [task.id for task in tasks]


class JobList(Sequence[tuple[Task, int]]):
    """Jobs as (task index, trial) pairs over a task sequence; `jobs[k]` is `(task, trial)`."""

    def __init__(self, tasks: Sequence[Task], pairs: Sequence[tuple[int, int]]) -> None:
        self.tasks = tasks
        self._index = array("l", (index for index, _ in pairs))
        self._trial = array("l", (trial for _, trial in pairs))

    @classmethod
    def of(cls, jobs: list[tuple[Task, int]]) -> "JobList":
        """Jobs given as (task, trial) pairs (a caller's own list)."""
        return cls([task for task, _ in jobs], [(k, trial) for k, (_, trial) in enumerate(jobs)])

    def trial(self, k: int) -> int:
        return self._trial[k]

    def key(self, k: int) -> tuple[str, int]:
        """(task id, trial) without rebuilding the task."""
        index = self._index[k]
        return (self.tasks.ids[index] if isinstance(self.tasks, TaskList) else self.tasks[index].id), self._trial[k]

    def task_json(self, k: int) -> str:
        tasks = self.tasks
        index = self._index[k]
        return tasks.json(index).decode("utf-8") if isinstance(tasks, TaskList) else tasks[index].model_dump_json()

    def __len__(self) -> int:
        return len(self._index)

    @overload
    def __getitem__(self, k: int) -> tuple[Task, int]: ...

    @overload
    def __getitem__(self, k: slice) -> list[tuple[Task, int]]: ...

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return self.tasks[self._index[k]], self._trial[k]

    def __iter__(self) -> Iterator[tuple[Task, int]]:
        return (self[k] for k in range(len(self)))

"""A batch's tasks kept as JSON (`core/task_list.py`): rebuilt equal, sliced compact, and small."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest

from qitos.core.task import Budget, Resource, Task
from qitos.core.task_list import JobList, TaskList


def _tasks(n: int) -> list[Task]:
    return [Task(id=f"t{i}", objective=f"question {i} é", budget=Budget(max_steps=i + 1),
                 resources=[Resource(kind="file", path=f"/data/{i}.txt")], metadata={"level": i % 3, "tags": ["a"]})
            for i in range(n)]


def test_tasks_rebuild_equal_and_slices_stay_compact():
    tasks = _tasks(5)
    kept = TaskList.of(tasks)
    assert isinstance(kept, TaskList) and len(kept) == 5 and kept.ids == [t.id for t in tasks]
    assert kept[3] == tasks[3] and list(kept) == tasks
    part = kept[1:3]
    assert isinstance(part, TaskList) and list(part) == tasks[1:3]
    assert kept[2] is not kept[2]  # a fresh object each time: a job cannot change another's task


def test_anything_but_a_plain_task_stays_an_object():
    class Special(Task):
        pass

    tasks = [*_tasks(2), Special(id="s", objective="x")]
    assert TaskList.of(tasks) is tasks
    with pytest.raises(TypeError, match="plain Tasks"):
        TaskList().append(Special(id="s", objective="x"))


def test_jobs_name_their_task_and_trial_without_rebuilding_it():
    tasks = TaskList(_tasks(3))
    jobs = JobList(tasks, [(index, trial) for trial in range(2) for index in range(3)])
    assert len(jobs) == 6 and jobs.key(4) == ("t1", 1) and jobs.trial(4) == 1
    assert jobs[4] == (tasks[1], 1) and jobs[:2] == [(tasks[0], 0), (tasks[1], 0)]
    assert json.loads(jobs.task_json(5)) == tasks[2].model_dump(mode="json")
    plain = JobList.of([(t, 0) for t in _tasks(2)])
    assert plain.key(1) == ("t1", 0) and json.loads(plain.task_json(0))["id"] == "t0"


def test_a_jsonl_task_set_is_held_in_a_few_hundred_bytes_a_task(tmp_path):
    """jsonl builds its list compact from the first task: what stays in memory per task (the task's JSON, its id, its
    sealed answer) is a fraction of the objects' 2.6 KB."""
    from qitos.benchmark.base import LoadOptions
    from qitos.benchmark.registry import get_adapter

    n = 4000
    root = tmp_path / "tasks.jsonl"
    root.write_text("".join(json.dumps({"id": f"s{i}", "question": f"question {i}", "answer": "The answer is 42."})
                            + "\n" for i in range(n)))
    adapter = get_adapter("jsonl")
    load = adapter.resolve_load(LoadOptions(root=root))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tasks = adapter.load_tasks(load)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert isinstance(tasks, TaskList) and len(tasks) == n and tasks[7].objective == "question 7"
    assert held / n < 1200, f"{held / n:.0f} bytes held per task"

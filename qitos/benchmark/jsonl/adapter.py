"""`--benchmark jsonl --root tasks.jsonl`: rows {id, question, answer, optional files}.

Files are paths relative to the JSONL file. Scoring uses `--option scorer=NAME` (default
`exact`). Useful for users' own task sets and for tests of the platform itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from qitos.core.task import Budget, Resource, Task

from ..base import BenchmarkAdapter, Evaluation, LoadOptions, Recipe, Requirement, TaskRuntime, filter_tasks
from ..errors import BenchmarkUsageError
from ..options import BenchmarkOptions, option
from ..scorers import SCORERS, get_scorer


def _root(load: LoadOptions) -> Path:
    if load.root is None:
        raise BenchmarkUsageError("the jsonl benchmark needs --root <tasks.jsonl>")
    root = Path(load.root)
    if not root.is_file():
        raise BenchmarkUsageError(f"--root {root}: no such file; give a JSONL file of {{id, question, answer}} rows")
    return root


def read_task_rows(path: Path) -> list[dict[str, Any]]:
    rows, seen = [], set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchmarkUsageError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise BenchmarkUsageError(f"{path} line {number}: expected an object with id, question, answer")
        missing = [k for k in ("id", "question") if not row.get(k)]
        if missing:
            raise BenchmarkUsageError(f"{path} line {number}: missing field(s) {missing}")
        if str(row["id"]) in seen:
            raise BenchmarkUsageError(f"{path} line {number}: duplicate id '{row['id']}'")
        seen.add(str(row["id"]))
        for f in row.get("files") or []:
            if not (path.parent / f).exists():
                raise BenchmarkUsageError(f"{path} line {number}: file '{f}' not found next to the JSONL file")
        rows.append(row)
    return rows


class JsonlOptions(BenchmarkOptions):
    scorer: Literal[tuple(SCORERS)] = option("exact", "how an answer is compared with the row's answer "  # type: ignore[valid-type]
                                             "(qitos/benchmark/scorers.py)")


class JsonlBenchmark(BenchmarkAdapter):
    name = "jsonl"
    description = "Your own task set: a JSONL file of {id, question, answer, files} rows"
    default_split = "default"
    default_recipe = "react"
    needs_workdir = False
    split_sides = True
    agent_processes = "batch"  # many short question-answer tasks: threads of one confined agent process
    scorer_official = True
    scorer_note = "your own task set: --option scorer=NAME against each row's answer"
    options_model = JsonlOptions
    variants = ()

    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        if load.root is None or not Path(load.root).is_file():
            return {"default": None}
        return {"default": len(read_task_rows(Path(load.root)))}

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        if load.root is None:
            return [Requirement(name="tasks file", ok=True, detail="given at run time with --root <tasks.jsonl>")]
        ok = Path(load.root).is_file()
        return [Requirement(name="tasks file", ok=ok, detail=str(load.root) if ok else f"{load.root} does not exist")]

    def recipes(self) -> dict[str, Recipe]:
        from qitos.recipes.qa import build_qa_agent

        return {"react": Recipe("react", build_qa_agent, "ReAct text agent with a read_file tool for the task's files")}

    def load_tasks(self, load: LoadOptions) -> list[Task]:
        path = _root(load)
        scorer = self.resolve_options(load.options)["scorer"]
        get_scorer(scorer)
        self.scorer = scorer  # the run's configuration picks the scorer, never a task the agent holds
        tasks = []
        for row in read_task_rows(path):
            task = Task(
                id=str(row["id"]),
                objective=str(row["question"]),
                resources=[Resource(kind="file", path=str((path.parent / f).resolve())) for f in row.get("files") or []],
                metadata={"benchmark": "jsonl", "split": "default", "scorer": scorer},
            )
            if row.get("answer") is not None:
                self.golds.keep(task.id, row["answer"])
            tasks.append(task)
        return filter_tasks(tasks, load)

    def shipped_files(self, load: LoadOptions) -> list[Path]:
        """The files the rows name travel with the task file to Ray nodes."""
        path = _root(load)
        return [path.parent / f for row in read_task_rows(path) for f in row.get("files") or []]

    def default_budget(self) -> Budget:
        return Budget(max_steps=10)

    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        return TaskRuntime(workdir=workdir, handles={"files": [r.path for r in task.resources]})  # oracle, in-process

    def do_nothing_success(self, task: Task, load: LoadOptions) -> bool | None:
        """Does no answer pass the run's scorer (`floor.py`)? None for unlabeled rows."""
        from .floor import do_nothing_success

        answer = self.golds.get(task.id) if task.id in self.golds else None
        return do_nothing_success(self.resolve_options(load.options)["scorer"], answer)

    def evaluate(self, task, result, runtime) -> Evaluation:
        answer = self.golds.get(task.id) if task.id in self.golds else None
        prediction = result.final_answer
        if answer is None:
            return Evaluation(success=None, score=None, prediction=prediction, metadata={"labeled": False})
        ok = get_scorer(getattr(self, "scorer", "exact"))(prediction, answer)
        return Evaluation(success=ok, score=1.0 if ok else 0.0, prediction=prediction)

"""Scoring side: `--benchmark jsonl --root tasks.jsonl`: rows {id, question, answer, optional files}.

Files are paths relative to the JSONL file. Scoring uses `--option scorer=NAME` (default
`exact`). Useful for users' own task sets and for tests of the platform itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from qitos.core.task import Budget, Resource, Task
from qitos.core.task_list import TaskList

from qitos.benchmark.base import (BenchmarkAdapter, Evaluation, LoadOptions, Recipe, RecipeRef, Requirement, TaskRuntime,
                                  filter_tasks)
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.options import BenchmarkOptions, option
from qitos.benchmark.scorers import SCORERS, get_scorer


def _root(load: LoadOptions) -> Path:
    if load.root is None:
        raise BenchmarkUsageError("the jsonl benchmark needs --root <tasks.jsonl>")
    root = Path(load.root)
    if root.is_dir():
        found = sorted(p.name for p in root.glob("*.jsonl"))[:3]
        example = root / (found[0] if found else "tasks.jsonl")
        raise BenchmarkUsageError(f"--root {root}: is a directory; the jsonl benchmark reads one file of "
                                  f"{{id, question, answer}} rows, e.g. --root {example}")
    if not root.is_file():
        raise BenchmarkUsageError(f"--root {root}: no such file; give a JSONL file of {{id, question, answer}} rows")
    return root


KEYS = ("id", "question", "answer", "files")


def _misspelt(path: Path, number: int, row: dict[str, Any]) -> None:
    """A key close to a known one it stands in for (`answr`) is a typo: refused, never run unscored."""
    import difflib

    for key in row:
        if key in KEYS:
            continue
        close = [k for k in difflib.get_close_matches(str(key), KEYS, n=1, cutoff=0.6) if k not in row]
        if close:
            raise BenchmarkUsageError(f"{path} line {number}: unknown key '{key}' (did you mean '{close[0]}'?); "
                                      f"a task row has the keys {', '.join(KEYS)}")


def task_warnings(path: Path, rows: list[dict[str, Any]], numbers: list[int]) -> list[str]:
    """One line each for rows that run unscored (no `answer`) and for keys that are ignored."""
    out = []
    unlabeled = [(n, str(r["id"])) for n, r in zip(numbers, rows) if r.get("answer") is None]
    if unlabeled:
        where = ", ".join(f"line {n} ({i})" for n, i in unlabeled[:3]) + (" ..." if len(unlabeled) > 3 else "")
        out.append(f"{path}: {len(unlabeled)} task(s) have no 'answer' ({where}): they run unscored "
                   "(success null); add an answer to score them")
    ignored = sorted({str(k) for r in rows for k in r if k not in KEYS})
    if ignored:
        out.append(f"{path}: key(s) {', '.join(ignored)} are ignored; a task row has the keys {', '.join(KEYS)}")
    return out


def read_task_rows(path: Path, numbers: list[int] | None = None) -> list[dict[str, Any]]:
    """The task rows of `path` (their line numbers appended to `numbers` when given)."""
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
        _misspelt(path, number, row)
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
        if numbers is not None:
            numbers.append(number)
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
        return {"react": Recipe("react", RecipeRef("qitos.recipes.qa:build_qa_agent"), "ReAct text agent with a read_file tool for the task's files")}

    def load_tasks(self, load: LoadOptions) -> list[Task]:
        path = _root(load)
        scorer = self.resolve_options(load.options)["scorer"]
        get_scorer(scorer)
        self.scorer = scorer  # the run's configuration picks the scorer, never a task the agent holds
        tasks, numbers = TaskList(), []  # compact from the first task (core/task_list.py)
        rows = read_task_rows(path, numbers)
        self.load_warnings = task_warnings(path, rows, numbers)  # said once before the run (runner.plan_batch)
        for row in rows:
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

    def dataset_digest(self, load: LoadOptions, tasks: list[Task]) -> str:
        """The tasks with their gold (base), and the bytes of every file a task names: an edited attachment is
        another dataset."""
        import hashlib

        h = hashlib.sha256(super().dataset_digest(load, tasks).encode())
        for task in tasks:
            for resource in task.resources:
                data = Path(resource.path).read_bytes() if Path(resource.path).is_file() else b"(not a file)"
                h.update(hashlib.sha256(data).digest())
        return h.hexdigest()[:16]

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
        from qitos.benchmark.jsonl.floor import do_nothing_success

        answer = self.golds.get(task.id) if task.id in self.golds else None
        return do_nothing_success(self.resolve_options(load.options)["scorer"], answer)

    def evaluate(self, task, result, runtime) -> Evaluation:
        answer = self.golds.get(task.id) if task.id in self.golds else None
        prediction = result.final_answer
        if answer is None:
            return Evaluation(success=None, score=None, prediction=prediction, metadata={"labeled": False})
        ok = get_scorer(getattr(self, "scorer", "exact"))(prediction, answer)
        return Evaluation(success=ok, score=1.0 if ok else 0.0, prediction=prediction)

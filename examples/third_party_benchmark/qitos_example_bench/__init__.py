"""A third-party benchmark: 'countdown' questions generated in code, scored by exact match.

Installing this package registers it with QitOS through the `qitos.benchmarks` entry point;
`qit bench list` then shows it and `qit bench run --benchmark countdown` runs it.

The gold contract every adapter follows: tasks carry no answers; `load_tasks` records each task's
answer with `self.golds.keep(task.id, answer)` and `evaluate` reads it back with `self.gold(task)`.
An oracle gets it only through `RecipeContext.oracle_gold()`, which makes the run non-official.
"""

from __future__ import annotations

from qitos.benchmark.base import BenchmarkAdapter, Evaluation, LoadOptions, Recipe, TaskRuntime, filter_tasks
from qitos.core.task import Budget, Task


class CountdownBenchmark(BenchmarkAdapter):
    name = "countdown"
    description = "Say the number before N (example third-party benchmark)"
    default_split = "test"
    default_recipe = "react"
    scorer_official = True  # this benchmark's own exact match is its reference scorer
    scorer_note = "countdown's exact match"

    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        return {"test": 10}

    def recipes(self) -> dict[str, Recipe]:
        from qitos.recipes.qa import build_qa_agent

        return {"react": Recipe("react", build_qa_agent, "generic ReAct question answering")}

    def load_tasks(self, load: LoadOptions) -> list[Task]:
        tasks = []
        for n in range(10, 20):
            task = Task(id=f"countdown-{n}", objective=f"What number comes right before {n}? Answer with the number.")
            self.golds.keep(task.id, str(n - 1))
            tasks.append(task)
        return filter_tasks(tasks, load)

    def default_budget(self) -> Budget:
        return Budget(max_steps=3)

    def prepare(self, task, trial, load, workdir) -> TaskRuntime:
        return TaskRuntime(workdir=workdir)

    def evaluate(self, task, result, runtime) -> Evaluation:
        ok = (result.final_answer or "").strip() == self.gold(task)
        return Evaluation(success=ok, score=float(ok))

"""The benchmark adapter protocol: what every benchmark family implements.

An adapter loads tasks, describes its dataset (digest), prepares and cleans up a runtime per
task, evaluates a finished run into score and success, offers recipes (baseline agents), and
says what it needs to run on this machine. The runner does everything else (concurrency,
resume, traces, rows), identically for every family.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from pydantic import BaseModel, Field

from qitos.core.task import Budget, Task

if TYPE_CHECKING:
    from qitos.core.agent import AgentModule
    from qitos.core.engine import RunResult


def default_data_dir() -> Path:
    env = os.environ.get("QITOS_DATA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "qitos" / "data"


class LoadOptions(BaseModel):
    """How to select tasks: the `qit bench run` flags that every family understands."""

    root: Path | None = None
    data_dir: Path = Field(default_factory=default_data_dir)
    split: str | None = None
    subset: str | None = None
    limit: int | None = None
    task_ids: list[str] | None = None
    variant: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class Requirement(BaseModel):
    name: str
    ok: bool
    detail: str = ""
    present: bool | None = None  # an optional extra (ok either way): is it installed here? `qit bench list` shows it


class Evaluation(BaseModel):
    success: bool | None = None
    score: float | None = None
    prediction: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass
class TaskRuntime:
    """What `prepare` hands to the recipe and the engine for one task × trial."""

    env: Any = None
    workdir: Path | None = None
    handles: dict[str, Any] = field(default_factory=dict)
    unavailable: str | None = None  # set → the row is `requires_unavailable` with this reason


@dataclass
class RecipeContext:
    task: Task
    runtime: TaskRuntime
    load: LoadOptions
    options: dict[str, Any]
    make_model: Callable[[str | None], Any]  # build an extra model (e.g. a simulated user); None → agent's flags


@dataclass
class Recipe:
    name: str
    build: Callable[[RecipeContext], "AgentModule"]
    description: str = ""
    official: bool = True  # oracles and other validators are not official baselines
    needs_model: bool = True


class BenchmarkAdapter:
    name: ClassVar[str] = "abstract"
    description: ClassVar[str] = ""
    default_split: ClassVar[str | None] = None
    default_recipe: ClassVar[str] = "react"
    deterministic_env: ClassVar[bool] = False
    needs_workdir: ClassVar[bool] = True  # False: `prepare` gets a path that is never created

    # -- discovery -----------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        """Split name → task count (None when unknown without the data)."""
        return {}

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        return []

    def recipes(self) -> dict[str, Recipe]:
        return {}

    # -- tasks -----------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        raise NotImplementedError

    def dataset_digest(self, load: LoadOptions, tasks: list[Task]) -> str:
        """sha256 (16 hex) over the selected tasks, reference data included."""
        h = hashlib.sha256()
        for task in tasks:
            h.update(json.dumps(task.model_dump(mode="json"), sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    def default_budget(self) -> Budget:
        return Budget(max_steps=30)

    def task_budget(self, task: Task) -> Budget:
        """The budget of one task before CLI overrides (families with per-task budgets override this)."""
        return self.default_budget()

    # -- one task ----------------------------------------------------------------------------------
    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        return TaskRuntime(workdir=workdir)

    def probe_runtime(self, task: Task, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """A runtime good enough to build the recipe's agent (to learn the RunSpec) without side effects.

        Adapters whose `prepare` touches something real (a VM, a service) override this so the first
        task is not set up twice.
        """
        return self.prepare(task, 0, load, workdir)

    def agent_built(self, ctx: RecipeContext, agent: "AgentModule") -> None:
        """Called after a recipe (or a `--runner`) built its agent, before the run starts: attach what
        the benchmark itself owns (e.g. Tau-Bench's simulated user) so user agents need no extra code."""

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        raise NotImplementedError

    def cleanup(self, runtime: TaskRuntime) -> None:
        env = runtime.env
        if env is not None and hasattr(env, "close"):
            env.close()

    # -- aggregation ----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Benchmark-specific metrics over result rows (plain dicts)."""
        return {}


def filter_tasks(tasks: list[Task], load: LoadOptions) -> list[Task]:
    """Apply --task-ids and --limit in a way every adapter shares."""
    if load.task_ids:
        wanted = set(load.task_ids)
        known = {t.id for t in tasks}
        unknown = sorted(wanted - known)
        if unknown:
            from .errors import BenchmarkUsageError

            sample = ", ".join(sorted(known)[:3])
            raise BenchmarkUsageError(f"--task-ids: unknown task id(s) {unknown[:5]}; ids look like: {sample}")
        tasks = [t for t in tasks if t.id in wanted]
    if load.limit is not None:
        tasks = tasks[: load.limit]
    return tasks

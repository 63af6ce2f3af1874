"""The benchmark adapter protocol: what every benchmark family implements.

An adapter loads tasks, describes its dataset (digest), prepares and cleans up a runtime per
task, evaluates a finished run into score and success, offers recipes (baseline agents), and
says what it needs to run on this machine. The runner does everything else (concurrency,
resume, traces, rows), identically for every family.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from pydantic import BaseModel, Field

from qitos.core.task import Budget, Task

from qitos.benchmark.gold import GoldBook, Sealed
from qitos.benchmark.refs import load_ref

if TYPE_CHECKING:
    from qitos.core.agent import AgentModule
    from qitos.core.engine import RunResult

    from qitos.benchmark.options import BenchmarkOptions
    from qitos.benchmark.contract import AgentEnvSpec


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
    # benchmarks whose reference scorer runs on what the agent made (OSWorld's metrics): (did it run confined,
    # how / why not), the `scorer_isolated` check's verdict; None: the scorer runs nothing the agent made
    scorer_isolation: tuple[bool, str] | None = None


@dataclass
class TaskRuntime:
    """What `prepare` hands to the recipe and the engine for one task × trial."""

    env: Any = None
    workdir: Path | None = None
    handles: dict[str, Any] = field(default_factory=dict)
    unavailable: str | None = None  # set → the row is `requires_unavailable` with this reason
    # scoring side only: writes an event into the run's trace (e.g. a simulated user's model call in `serve`)
    trace_event: Callable[[str, dict[str, Any]], None] | None = None
    # scoring side only: builds the run's models (None: the agent's; a name: that model with the agent's settings),
    # e.g. for a simulated user that `serve` runs; set by the job after `prepare`
    make_model: Callable[[str | None], Any] | None = None


@dataclass
class RecipeContext:
    """What a recipe (or a `--runner` callable) gets to build its agent. It carries no gold: an oracle
    asks for it with `oracle_gold()`, and that marks the run aided (`agent_unaided` fails)."""

    task: Task
    runtime: TaskRuntime
    load: LoadOptions
    options: dict[str, Any]
    make_model: Callable[[str | None], Any]  # build an extra model (e.g. a simulated user); None → agent's flags
    oracle: Sealed[Any] | None = None
    oracle_used: bool = False

    def oracle_gold(self) -> Any:
        """The task's gold, for oracles and other validators. Using it makes the run non-official."""
        self.oracle_used = True
        if self.oracle is None:
            raise LookupError(f"no gold for task '{self.task.id}': the agent side never holds gold (a --runner that "
                              "needs it is a validator: add --validator), or the split is unlabeled")
        return self.oracle.open()


@dataclass(frozen=True)
class RecipeRef:
    """A recipe's build function named as 'module:function' and imported when an agent is built: adapters name
    their recipes (which sit in the layer above them, `qitos.recipes`) without importing them, as the benchmark
    registry names the families."""

    ref: str

    def __call__(self, ctx: RecipeContext) -> "AgentModule":
        return load_ref(self.ref)(ctx)


@dataclass
class Recipe:
    name: str
    build: Callable[[RecipeContext], "AgentModule"]  # a function, or a RecipeRef naming one
    description: str = ""
    official: bool = True  # oracles and other validators are not official baselines
    needs_model: bool = True
    # the benchmark's reference baseline, as its upstream code runs it (checked by differential tests): True;
    # QitOS's own agent: False (its RunSpec says so, and numbers are not comparable with published baselines);
    # None: the benchmark publishes no reference agent
    upstream: bool | None = None
    # why this recipe cannot run a task here (e.g. an oracle whose reference solution is unreliable), checked
    # before `prepare`: the row ends `requires_unavailable` with the reason, nothing staged or built
    unavailable: Callable[[Task], str | None] | None = None


class BenchmarkAdapter:
    """Gold contract: `load_tasks` returns tasks without gold and records each task's gold with
    `self.golds.keep(task.id, gold)`; `evaluate` reads it back with `self.gold(task)`. Adapters declare
    `scorer_official`: True only when scoring is the benchmark's reference scorer (or proven equal to it)."""

    name: ClassVar[str] = "abstract"
    description: ClassVar[str] = ""
    scorer_official: ClassVar[bool] = False
    scorer_note: ClassVar[str] = ""  # one line: what the scorer is, for the `scorer_official` check
    default_split: ClassVar[str | None] = None
    default_recipe: ClassVar[str] = "react"
    deterministic_env: ClassVar[bool] = False
    needs_workdir: ClassVar[bool] = True  # False: `prepare` gets a path that is never created
    # True once the family's agent side is split from its scoring side (`agent_env`, `serve`, scoring from the
    # final state): its non-oracle runs go to the confined agent process. False: they run in this process, and
    # `agent_isolated` fails, so they are never official.
    split_sides: ClassVar[bool] = False
    # How the agent side runs tasks: "task", a fresh confined process per task (private /tmp; the default for tasks
    # with files, environments, sandboxes); "batch", tasks on threads of one confined agent process (a shared
    # model client: for many short tasks without files of their own). `--agent-processes` overrides it.
    agent_processes: ClassVar[str] = "task"
    # The `--option` keys this family takes (see `qitos.benchmark.options`); None: undeclared, passed through
    # unchecked (third-party adapters written before declarations). Built-in families all declare theirs.
    options_model: ClassVar["type[BenchmarkOptions] | None"] = None
    # What a run without --subset / --variant selects, recorded as if given (None: no subset filter / no variants)
    default_subset: ClassVar[str | None] = None
    default_variant: ClassVar[str | None] = None
    # The prompt variants `--variant` chooses from; () refuses --variant; None: undeclared (not checked)
    variants: ClassVar[tuple[str, ...] | None] = None

    # -- gold (scoring side) ---------------------------------------------------------------------
    @property
    def golds(self) -> GoldBook:
        book = self.__dict__.get("_golds")
        return book if book is not None else self.__dict__.setdefault("_golds", GoldBook())

    def gold(self, task: Task) -> Any:
        """The gold of `task`, for scoring; KeyError when it was never loaded."""
        return self.golds.get(task.id)

    def oracle_handle(self, task: Task) -> Sealed[Any] | None:
        """What `RecipeContext.oracle_gold()` opens; adapters whose oracle needs more than the scoring gold
        (e.g. a reference action plan) override this."""
        return self.golds.sealed(task.id)

    # -- options -------------------------------------------------------------------------------
    def resolve_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Every declared option with its value, defaults filled in; an unknown key, a bad value or one out of
        range is a BenchmarkUsageError naming it (see `qitos.benchmark.options`)."""
        from qitos.benchmark.options import resolve_options

        return resolve_options(self.options_model, options, self.name)

    def resolve_load(self, load: LoadOptions) -> LoadOptions:
        """`load` with every default written in (split, subset, variant, options): what a run records, so a run
        that leaves a default out and one that writes it in are the same configuration."""
        from qitos.benchmark.errors import BenchmarkUsageError

        variant = load.variant or self.default_variant
        if load.variant is not None and self.variants is not None and load.variant not in self.variants:
            allowed = f"the variants {', '.join(self.variants)}" if self.variants else "no --variant"
            raise BenchmarkUsageError(f"--variant {load.variant}: {self.name} has {allowed}")
        return load.model_copy(update={"split": load.split or self.default_split,
                                       "subset": load.subset or self.default_subset, "variant": variant,
                                       "options": self.resolve_options(load.options)})

    # -- discovery -----------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        """Split name → task count (None when unknown without the data)."""
        return {}

    def subset_splits(self, load: LoadOptions) -> dict[str, dict[str, int | None]]:
        """Per subset whose splits differ (e.g. Tau-Bench's domains): its splits, for `qit bench list`.
        Empty: the family's splits do not depend on the subset."""
        return {}

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        return []

    def runnable_here(self, load: LoadOptions) -> dict[str, dict[str, Any]]:
        """Per split: how many tasks can run on this machine, and why the others cannot.

        The default is all or nothing by `requirements`; families whose tasks differ (services,
        sandbox packages) override it with a per-task count that is still cheap to compute.
        """
        reqs = self.requirements(load)
        missing = "; ".join(f"{r.name}: {r.detail}" for r in reqs if not r.ok)
        out: dict[str, dict[str, Any]] = {}
        for split, count in self.splits(load).items():
            if count is None:
                continue
            out[split] = {"tasks": count, "runnable": 0 if missing else count,
                          "reasons": {missing: count} if missing else {}}
        return out

    def recipes(self) -> dict[str, Recipe]:
        return {}

    # -- tasks -----------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        raise NotImplementedError

    def dataset_digest(self, load: LoadOptions, tasks: list[Task]) -> str:
        """sha256 (16 hex) over the selected tasks, their gold included."""
        h = hashlib.sha256()
        for task in tasks:
            h.update(json.dumps(task.model_dump(mode="json"), sort_keys=True, default=str).encode())
            if task.id in self.golds:
                h.update(json.dumps(self.golds.get(task.id), sort_keys=True, default=_stable_json).encode())
        return h.hexdigest()[:16]

    def cluster_resources(self, task: Task, load: LoadOptions) -> dict[str, float]:
        """Custom Ray resources a job of `task` needs on its node (`osworld_vm`, `docker`, `kvm`; see
        `cluster.placement`); none by default."""
        return {}

    def shipped_files(self, load: LoadOptions) -> list[Path]:
        """Files beside a `--root` file that travel with it to Ray nodes (e.g. the files a task names)."""
        return []

    def default_budget(self) -> Budget:
        return Budget(max_steps=30)

    def task_budget(self, task: Task) -> Budget:
        """The budget of one task before CLI overrides (families with per-task budgets override this)."""
        return self.default_budget()

    # -- one task ----------------------------------------------------------------------------------
    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        return TaskRuntime(workdir=workdir)

    def prepare_scoring_side(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """`prepare` for a job whose agent runs on the agent side: only what the scoring side needs (services,
        a VM, gold-holding checkers); families that build the agent's tools in `prepare` override this."""
        return self.prepare(task, trial, load, workdir)

    def probe_runtime(self, task: Task, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """A runtime good enough to build the recipe's agent (to learn the RunSpec) without side effects.

        Adapters whose `prepare` touches something real (a VM, a service) override this so the first
        task is not set up twice.
        """
        return self.prepare(task, 0, load, workdir)

    def describe_run(self, cfg: Any) -> str | None:
        """One line `qit bench run` prints with its plan (e.g. Tau-Bench's simulated user), or None."""
        return None

    def agent_built(self, ctx: RecipeContext, agent: "AgentModule") -> None:
        """Called after a recipe (or a `--runner`) built its agent, before the run starts: attach what
        the benchmark itself owns (e.g. Tau-Bench's simulated user) so user agents need no extra code."""

    # -- the agent side's view (see qitos.run.sides) --------------------------------------------
    def agent_env(self, task: Task, runtime: TaskRuntime) -> "AgentEnvSpec | None":
        """How the agent side builds the environment (and handles, e.g. tools) it acts on; None: it has none.
        No gold: this crosses to the agent process."""
        return None

    def agent_files(self, task: Task, runtime: TaskRuntime) -> dict[str, str]:
        """The task's input files: path in the agent's work dir -> host path (shipped as bytes).
        Default: every file resource, by its base name."""
        return {Path(r.path).name: r.path for r in task.resources if r.kind == "file" and Path(r.path).is_file()}

    def agent_handles(self, task: Task, runtime: TaskRuntime) -> dict[str, Any]:
        """Public JSON handles for the agent side's `RecipeContext.runtime.handles`; paths are relative to its
        work dir (its current directory). Default: the shipped files under "files"."""
        return {"files": sorted(self.agent_files(task, runtime))}

    def scoring_side_sources(self) -> list[str]:
        """Source files that hold gold (e.g. a QitOS-authored benchmark's checkers and reference plans): the
        agent host masks them (and their bytecode), so the agent side must never import them."""
        return []

    def agent_network(self, load: LoadOptions) -> bool:
        """Does the agent side need the host's network beyond its model endpoint (the web, services, a VM)?"""
        return False

    def serve(self, task: Task, runtime: TaskRuntime, method: str, payload: dict[str, Any]) -> Any:
        """Answer an agent-side call that needs the scoring side (a simulated user's reply, a subtask's reveal,
        a command in the task's sandbox). Refuse what the benchmark's protocol does not allow at this point."""
        from qitos.benchmark.contract import AgentCallRefused

        raise AgentCallRefused(f"benchmark '{self.name}' offers no scoring-side service '{method}'")

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        """Score from what the agent side returned: `result.final_answer` and `result.final_state`."""
        raise NotImplementedError

    def do_nothing_success(self, task: Task, load: LoadOptions) -> bool | None:
        """Would an agent that does nothing succeed on `task` under the benchmark's own scoring rule, as its gold
        decides (e.g. Tau-Bench: a task whose gold writes nothing and asks for no output)? Scoring side only: every
        row records it, so `qit bench eval` shows the do-nothing floor beside the success rate (see
        `qitos.benchmark.floor`). None (the default): the benchmark has no such rule."""
        return None

    def rescore(self, task: Task, recorded: dict[str, Any], run_dir: str, load: LoadOptions) -> Evaluation | None:
        """Score a finished run again for `qit bench eval` (`qitos.results.rescore`), from what its manifest recorded
        (`recorded`: the scoring side's `evaluation` record, e.g. `final_answer` and CyBench's per-question
        `answers`) and its trace (`run_dir`), with the gold `load` selects. None (the default): the family has no
        rule of its own here, and eval scores the recorded final answer with `evaluate` where it can."""
        return None

    def cleanup(self, runtime: TaskRuntime) -> None:
        env = runtime.env
        if env is not None and hasattr(env, "close"):
            env.close()

    # -- aggregation ----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Benchmark-specific metrics over result rows (plain dicts)."""
        return {}

    def export_results(self, fmt: str, rows: list[dict[str, Any]], paths: list[Path]) -> str:
        """`qit bench export --format FMT` for a format of this benchmark's upstream (GAIA's leaderboard submission,
        Tau-Bench's results JSON): the text to write. `rows` are the readable rows of the results files `paths`, of
        every benchmark in them. `qitos.results.export.UPSTREAM` names which benchmark writes which format; the
        results layer reaches the adapter through the registry, never by import. Default: not supported."""
        from qitos.benchmark.errors import BenchmarkUsageError

        raise BenchmarkUsageError(f"--format {fmt}: benchmark '{self.name}' exports no such format")


def _stable_json(value: Any) -> Any:
    """JSON for gold that is not plain data, the same in every process: models and dataclasses by their fields,
    functions (e.g. a desktop task's checker) by name. `str()` would embed memory addresses, and a digest that
    changes per process changes the RunSpec fingerprint, so a rerun would refuse to resume its own results."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if callable(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
    return str(value)


def filter_tasks(tasks: list[Task], load: LoadOptions) -> list[Task]:
    """Apply --task-ids and --limit in a way every adapter shares."""
    if load.task_ids:
        wanted = set(load.task_ids)
        known = {t.id for t in tasks}
        unknown = sorted(wanted - known)
        if unknown:
            from qitos.benchmark.errors import BenchmarkUsageError

            sample = ", ".join(sorted(known)[:3])
            raise BenchmarkUsageError(f"--task-ids: unknown task id(s) {unknown[:5]}; ids look like: {sample}")
        tasks = [t for t in tasks if t.id in wanted]
    if load.limit is not None:
        if load.limit < 1:
            from qitos.benchmark.errors import BenchmarkUsageError

            raise BenchmarkUsageError(f"--limit {load.limit}: must be at least 1 (leave it out to run every task)")
        tasks = tasks[: load.limit]
    return tasks

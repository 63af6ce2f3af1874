"""``--benchmark tau-bench``: the retail and airline domains of sierra-research/tau-bench.

Selection: ``--subset retail|airline`` (the domain, default retail), ``--split`` (retail: test 115,
train 500, dev 20; airline: test 50). Task ids are ``tau_<domain>_<split>_<index:05d>``. Data is
read from ``--root`` (the folder holding retail/ and airline/) or ``<data dir>/tau-bench``.

The agent never sees the task instruction: it goes to the simulated user, whose first message
opens the conversation. Gold actions and outputs live in task metadata under keys that
``Task.public_summary()`` drops. Options: ``user_strategy``, ``user_model`` (``--user-model``),
``user_temperature``, ``user_seed`` (``--user-temperature``, ``--user-seed``), ``user_replies``
(see :func:`engine_env.setup_user`); upstream's run options ``start_index``, ``end_index``,
``shuffle``, ``run_seed``, ``num_few_shots`` (see :mod:`.run_options`). The score is upstream's
reward (0 or 1; 0 when the episode never ended); success is reward 1.

A ``--runner`` agent must attach the simulated user itself:
``qitos.benchmark.tau_bench.engine_env.setup_user(ctx)`` in its builder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.core.task import Budget, EnvSpec, Task

from ..base import BenchmarkAdapter, Evaluation, LoadOptions, Recipe, Requirement, TaskRuntime, filter_tasks
from ..errors import BenchmarkUsageError
from .data import DOMAIN_SPLITS, DomainData, load_domain
from .engine_env import TauEngineEnv, user_replies, user_sampling
from .errors import TauDataError
from .run_options import RunOptions, run_options
from .user import USER_STRATEGIES

if TYPE_CHECKING:
    from qitos.core.engine import RunResult

DEFAULT_DOMAIN = "retail"
FETCH_HINT = "run `qit data fetch tau-bench`, or point --data-dir / QITOS_DATA_DIR (or --root) at a copy"
SUCCESS_TOLERANCE = 1e-6  # upstream counts a trial as passed when the reward is within 1e-6 of 1


def data_root(load: LoadOptions) -> Path:
    """The folder that holds retail/ and airline/."""
    return Path(load.root).expanduser() if load.root else Path(load.data_dir).expanduser() / "tau-bench"


def domain_name(load: LoadOptions) -> str:
    name = load.subset or DEFAULT_DOMAIN
    if name not in DOMAIN_SPLITS:
        raise BenchmarkUsageError(f"--subset {name}: tau-bench has the subsets {', '.join(DOMAIN_SPLITS)}")
    return name


def check_split(domain: str, split: str | None) -> str:
    if split not in DOMAIN_SPLITS[domain]:
        raise BenchmarkUsageError(
            f"--split {split}: tau-bench {domain} has the splits {', '.join(DOMAIN_SPLITS[domain])}"
        )
    return split


def task_id(domain: str, split: str, index: int) -> str:
    return f"tau_{domain}_{split}_{index:05d}"


def load_data(load: LoadOptions, domain: str) -> DomainData:
    root = data_root(load)
    try:
        return load_domain(root, domain)
    except TauDataError as exc:
        raise BenchmarkUsageError(f"tau-bench data not usable at {root}: {exc}. To get it, {FETCH_HINT}") from None


class TauBenchAdapter(BenchmarkAdapter):
    name = "tau-bench"
    description = "τ-bench retail/airline: a tool-using agent serves a simulated user under a domain policy"
    default_split = "test"
    default_recipe = "tool-calling"
    deterministic_env = True
    scorer_official = True
    scorer_note = "upstream's reward (database hash and required outputs), checked by the conformance fixtures"

    # -- discovery -----------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        domain = domain_name(load)
        counts: dict[str, int | None] = {}
        for split in DOMAIN_SPLITS[domain]:
            path = data_root(load) / domain / f"tasks_{split}.json"
            try:
                counts[split] = len(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                counts[split] = None
        return counts

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        root = data_root(load)
        missing = [d for d in DOMAIN_SPLITS if not (root / d / "tasks_test.json").is_file()]
        if missing:
            detail = f"{', '.join(missing)} not found under {root}; {FETCH_HINT}"
            return [Requirement(name="tau-bench data", ok=False, detail=detail)]
        return [Requirement(name="tau-bench data", ok=True, detail=str(root))]

    def recipes(self) -> dict[str, Recipe]:
        from qitos.recipes.tau_bench import tau_recipes

        return tau_recipes()

    # -- tasks -----------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        domain = domain_name(load)
        split = check_split(domain, load.split or self.default_split)
        opts = check_options(load.options)
        data = load_data(load, domain)
        tasks = [self._task(data, split, index) for index in opts.indices(len(data.split_tasks(split)))]
        for task in tasks:
            source = data.task(split, int(task.metadata["task_index"]))
            self.golds.keep(task.id, {"actions": [a.model_dump() for a in source.actions],
                                      "outputs": list(source.outputs)})
        return filter_tasks(tasks, load)

    def _task(self, data: DomainData, split: str, index: int) -> Task:
        return Task(
            id=task_id(data.name, split, index),
            objective=(
                f"Act as the {data.name} customer-service agent: help the user who writes to you, following the "
                "domain policy, and use the tools to look up and change their records."
            ),
            inputs={"domain": data.name},
            env_spec=EnvSpec(type="tau-bench", config={"domain": data.name, "split": split, "task_index": index},
                             capabilities=["tools", "simulated_user"]),
            success_criteria=[
                "The final database equals the one the task's gold actions produce.",
                "Every piece of information the task requires is said to the user.",
            ],
            metadata={
                "benchmark": self.name, "split": split, "subset": data.name, "task_index": index,
            },
        )  # fmt: skip

    def dataset_digest(self, load: LoadOptions, tasks: list[Task]) -> str:
        """The selected tasks (gold included), the pristine database, the policy and the tool schemas."""
        h = hashlib.sha256(super().dataset_digest(load, tasks).encode())
        for domain in sorted({t.metadata["subset"] for t in tasks}):
            data = load_data(load, domain)
            h.update(data.pristine.digest().encode())
            h.update(data.wiki.encode())
            h.update(json.dumps(data.tools_info, sort_keys=True).encode())
        return h.hexdigest()[:16]

    def default_budget(self) -> Budget:
        return Budget(max_steps=30)  # upstream's max_num_steps

    # -- one task ----------------------------------------------------------------------------------
    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        meta = task.metadata
        data = load_data(load, meta["subset"])
        env = TauEngineEnv(data, meta["split"], int(meta["task_index"]))
        return TaskRuntime(env=env, workdir=workdir, handles={"domain": data.name, "trial": trial})

    def describe_run(self, cfg: Any) -> str | None:
        """The simulated user: strategy, model (default: the agent's) and sampling (unset: not sent)."""
        options = cfg.load.options
        strategy = options.get("user_strategy", "llm")
        if strategy in ("scripted", "human") or (cfg.recipe or self.default_recipe) == "oracle":
            return f"simulated user: {strategy if cfg.recipe != 'oracle' else 'scripted (oracle)'}"
        model = options.get("user_model") or f"{cfg.model.model_name} (the agent's model)"
        sampling = ", ".join(f"{k}={options[f'user_{k}']}" for k in ("temperature", "seed") if f"user_{k}" in options)
        return f"simulated user: {strategy}, model {model}, sampling {sampling or 'not sent (as upstream)'}"

    def agent_built(self, ctx, agent) -> None:
        """A `--runner` agent gets the simulated user from the run options, like the built-in recipes."""
        from .engine_env import setup_user

        env = ctx.runtime.env
        if env is not None and getattr(env, "user", None) is None:
            setup_user(ctx)

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        outcome = runtime.env.outcome()
        reward = float(outcome.get("reward") or 0.0)
        return Evaluation(
            success=abs(reward - 1.0) <= SUCCESS_TOLERANCE, score=reward,
            prediction=outcome.get("last_message"), metadata=outcome,
        )  # fmt: skip

    def cleanup(self, runtime: TaskRuntime) -> None:
        if runtime.env is not None:
            runtime.env.release()

    # -- aggregation ----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        from .metrics import tau_metrics

        return tau_metrics(rows)


def check_options(options: dict[str, Any]) -> RunOptions:
    """Refuse bad tau-bench options before any task runs; returns upstream's run options."""
    strategy = options.get("user_strategy", "llm")
    if strategy not in USER_STRATEGIES:
        raise BenchmarkUsageError(
            f"--option user_strategy={strategy}: unknown; choose one of {', '.join(USER_STRATEGIES)}"
        )
    try:
        user_replies(options.get("user_replies"))
        user_sampling(options)
        return run_options(options)
    except ValueError as exc:
        raise BenchmarkUsageError(str(exc)) from None

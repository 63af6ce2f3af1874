"""Scoring side: ``--benchmark tau-bench``, the retail and airline domains of sierra-research/tau-bench.

Selection: ``--subset retail|airline`` (the domain, default retail), ``--split`` (retail: test 115,
train 500, dev 20; airline: test 50). Task ids are ``tau_<domain>_<split>_<index:05d>``. Data is
read from ``--root`` (the folder holding retail/ and airline/) or ``<data dir>/tau-bench``.

The two sides: the agent side (:mod:`.agent_env`, :mod:`.engine_env`, :mod:`.domain`) is shown the
policy and the tool schemas, names each action, and never sees a task's instruction, gold actions or
outputs. The scoring side (this module, :mod:`.scoring`, :mod:`.episode`, the tools, :mod:`.data`,
:mod:`.user`, :mod:`.reward`, :mod:`.upstream`) holds the tasks, the simulated user and the episode: every
action reaches it through ``serve`` (``user.reset``, ``env.step``, ``env.fail``) and runs here, on this
side's database, so the reward is computed from this side's own database, action log and end, never
from a state the agent side returns. Options (declared in :mod:`.options`; the subset defaults to
retail and is recorded as such): ``user_strategy``, ``user_model`` (``--user-model``),
``user_temperature``, ``user_seed`` (``--user-temperature``, ``--user-seed``), ``user_replies``
(see :meth:`.scoring.TauScoring._build_user`); upstream's run options ``start_index``, ``end_index``,
``shuffle``, ``run_seed``, ``num_few_shots`` (see :mod:`.run_options`). The score is upstream's
reward (0 or 1; 0 when the episode never ended); success is reward 1.

The simulated user is the benchmark's: a ``--runner`` agent meets it with no code of its own (its
``respond`` actions go to it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.core.task import Budget, EnvSpec, Task

from qitos.benchmark.base import (BenchmarkAdapter, Evaluation, LoadOptions, Recipe, RecipeRef, Requirement, TaskRuntime,
                                  filter_tasks)
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.contract import AgentCallRefused, AgentEnvSpec
from qitos.benchmark.tau_bench.agent_env import FACTORY, FOLDER, build_env
from qitos.benchmark.tau_bench.data import DOMAIN_SPLITS, DomainData, load_domain
from qitos.benchmark.tau_bench.digest import canonical_json
from qitos.benchmark.tau_bench.domain import agent_files
from qitos.benchmark.tau_bench.errors import TauDataError
from qitos.benchmark.tau_bench.options import TauOptions
from qitos.benchmark.tau_bench.run_options import RunOptions, run_options
from qitos.benchmark.tau_bench.scoring import DirectLink, TauRuntime, TauScoring, agent_texts

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
    split_sides = True
    options_model = TauOptions
    # written by the scoring side only (the receiver drops them from the agent's stream): the actions it ran, its
    # failures, the user's opening and the user's model calls
    scoring_event_kinds = ("env_step", "env_failure", "env_reset", "user_prompt", "user_model_call")
    default_subset = DEFAULT_DOMAIN
    variants = ()

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

    def subset_splits(self, load: LoadOptions) -> dict[str, dict[str, int | None]]:
        """Each domain's splits (retail: test, train, dev; airline: test)."""
        return {domain: self.splits(load.model_copy(update={"subset": domain})) for domain in DOMAIN_SPLITS}

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        root = data_root(load)
        missing = [d for d in DOMAIN_SPLITS if not (root / d / "tasks_test.json").is_file()]
        if missing:
            detail = f"{', '.join(missing)} not found under {root}; {FETCH_HINT}"
            return [Requirement(name="tau-bench data", ok=False, detail=detail)]
        return [Requirement(name="tau-bench data", ok=True, detail=str(root))]

    def recipes(self) -> dict[str, Recipe]:
        r = RecipeRef
        return {
            "tool-calling": Recipe(
                "tool-calling", r("qitos.recipes.tau_bench:build_tool_calling"),
                "upstream's tool-calling agent: the policy as system prompt, native function calls, text goes to the user",
                upstream=True,
            ),
            "react": Recipe(
                "react", r("qitos.recipes.tau_bench:build_react"), "upstream's ReAct agent: Thought + Action JSON in text, no native tools",
                upstream=True,
            ),
            "act": Recipe("act", r("qitos.recipes.tau_bench:build_act"), "upstream's Act agent: Action JSON in text, no native tools",
                          upstream=True),
            "few-shot": Recipe(
                "few-shot", r("qitos.recipes.tau_bench:build_few_shot"),
                "upstream's few-shot tool-calling agent (--option num_few_shots=5 run_seed=10, as upstream)",
                upstream=True,
            ),
            "tool-calling-repair": Recipe(
                "tool-calling-repair", r("qitos.recipes.tau_bench:build_repair"),
                "NOT upstream's protocol: tool-calling whose invalid tool-argument JSON gets a repair message",
                upstream=False,
            ),
            "oracle": Recipe(
                "oracle", r("qitos.recipes.tau_bench:build_oracle"), "plays the gold actions and states the outputs (validates the env; not a baseline)",
                official=False, needs_model=False,
            ),
        }  # fmt: skip

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
        """Every field of every selected task (the user's id and instruction, what the simulated user acts out,
        as well as the gold actions and outputs), the pristine database, the policy, its rules and the tool
        schemas: a task changed in any of them is another dataset, so another configuration."""
        h = hashlib.sha256(super().dataset_digest(load, tasks).encode())
        for task in tasks:
            meta = task.metadata
            source = load_data(load, meta["subset"]).task(meta["split"], int(meta["task_index"]))
            h.update(canonical_json(source.model_dump(mode="json")).encode())
        for domain in sorted({t.metadata["subset"] for t in tasks}):
            data = load_data(load, domain)
            h.update(data.pristine.digest().encode())
            h.update(data.wiki.encode())
            h.update(json.dumps(data.rules, sort_keys=True).encode())
            h.update(json.dumps(data.tools_info, sort_keys=True).encode())
        return h.hexdigest()[:16]

    def default_budget(self) -> Budget:
        return Budget(max_steps=30)  # upstream's max_num_steps

    # -- one task ---------------------------------------------------------------------------------
    def prepare_scoring_side(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """The scoring side of one task × trial: its simulated user and reward (:class:`.scoring.TauScoring`), and
        the JSON arguments of the agent side's env (``agent_env``)."""
        meta = task.metadata
        data = load_data(load, meta["subset"])
        split, index = meta["split"], int(meta["task_index"])
        runtime = TauRuntime(workdir=workdir)
        runtime.scoring = TauScoring(data, split, index, load.options, runtime)
        runtime.handles = {"agent_kwargs": self._agent_kwargs(data, split, index, trial, load.options)}
        return runtime

    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """The scoring side, plus for in-process runs (oracles) the agent side's env, built by the same factory as
        in the agent process on this process's copy of the domain, and linked to `serve` directly."""
        runtime = self.prepare_scoring_side(task, trial, load, workdir)
        data = runtime.scoring.data  # type: ignore[attr-defined]
        agent_side = build_env(data.agent_domain(), workdir, DirectLink(self, task, runtime),
                               **runtime.handles["agent_kwargs"])
        runtime.env = agent_side.env
        runtime.handles = {**agent_side.handles, **runtime.handles}
        return runtime

    @staticmethod
    def _agent_kwargs(data: DomainData, split: str, index: int, trial: int, options: dict[str, Any]) -> dict[str, Any]:
        return {"split": split, "task_index": index, "trial": trial,
                "user_strategy": str(options.get("user_strategy") or "llm"),
                "texts": agent_texts(data, split, index, trial, options), "db_digest": data.pristine.digest()}

    def agent_env(self, task: Task, runtime: TaskRuntime) -> AgentEnvSpec:
        """The agent side's env: the domain's policy, rules and tool schemas as files; no task file, no database
        (every action runs on the scoring side)."""
        data = runtime.scoring.data  # type: ignore[attr-defined]
        folder = data.root / data.name
        files = {f"{FOLDER}/{rel}": str(folder / rel) for rel in agent_files(data.name)}
        return AgentEnvSpec(factory=FACTORY, kwargs={"domain": data.name, **runtime.handles["agent_kwargs"]},
                            files=files)

    def agent_handles(self, task: Task, runtime: TaskRuntime) -> dict[str, Any]:
        return {}  # the factory's own handles (domain, trial) are the agent side's

    def serve(self, task: Task, runtime: TaskRuntime, method: str, payload: dict[str, Any]) -> Any:
        """The episode, run here: ``user.reset`` (the user's first message), ``env.step`` (one action on this
        side's database; ``respond`` goes to the user), ``env.fail`` (the agent ends the episode, reward 0)."""
        scoring: TauScoring = runtime.scoring  # type: ignore[attr-defined]
        if method == "user.reset":
            return scoring.reset()
        if method == "env.step":
            return scoring.step(payload)
        if method == "env.fail":
            return scoring.fail(payload)
        raise AgentCallRefused(f"tau-bench offers no scoring-side service '{method}' "
                               "(only user.reset, env.step, env.fail)")

    def describe_run(self, cfg: Any) -> str | None:
        """The simulated user: strategy, model (default: the agent's) and sampling (unset: not sent)."""
        options = cfg.load.options
        strategy = options.get("user_strategy", "llm")
        if strategy in ("scripted", "human") or (cfg.recipe or self.default_recipe) == "oracle":
            return f"simulated user: {strategy if cfg.recipe != 'oracle' else 'scripted (oracle)'}"
        model = options.get("user_model") or f"{cfg.model.model_name} (the agent's model)"
        keys = ("temperature", "seed", "top_p", "reasoning_effort", "request_timeout", "max_retries", "extra_body")
        sampling = ", ".join(f"{k}={options[f'user_{k}']}" for k in keys if options.get(f"user_{k}") is not None)
        return f"simulated user: {strategy}, model {model}, sampling {sampling or 'not sent (as upstream)'}"

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        """Upstream's reward, from this side's own episode (database, actions, end) and record of the user; the
        agent side's final state only contributes its transcript to the report."""
        outcome = runtime.scoring.outcome(result.final_state)  # type: ignore[attr-defined]
        reward = float(outcome.get("reward") or 0.0)
        return Evaluation(
            success=abs(reward - 1.0) <= SUCCESS_TOLERANCE, score=reward,
            prediction=outcome.get("last_message"), metadata=outcome,
        )  # fmt: skip

    def do_nothing_success(self, task: Task, load: LoadOptions) -> bool | None:
        """Reward 1 for an agent that ends at once: the gold writes nothing and asks for no output (`floor.py`)."""
        from qitos.benchmark.tau_bench.floor import do_nothing_success

        meta = task.metadata
        return do_nothing_success(load_data(load, meta["subset"]), meta["split"], int(meta["task_index"]))

    def cleanup(self, runtime: TaskRuntime) -> None:
        if runtime.env is not None:
            runtime.env.release()

    # -- aggregation ----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        from qitos.benchmark.tau_bench.metrics import tau_metrics

        return tau_metrics(rows)

    def export_results(self, fmt: str, rows: list[dict[str, Any]], paths: list[Path]) -> str:
        """`--format tau-bench`: upstream run.py's results JSON, from the tau-bench rows of the files."""
        if fmt != "tau-bench":
            return super().export_results(fmt, rows, paths)
        from qitos.benchmark.tau_bench.export import export_results

        return export_results(paths)


def check_options(options: dict[str, Any]) -> RunOptions:
    """Refuse bad tau-bench options before any task runs (see :mod:`.options`); returns upstream's run options."""
    return run_options(options)

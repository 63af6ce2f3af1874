"""Scoring side: `qit bench run --benchmark osworld`, the 369 OSWorld computer-use tasks through the QitOS runner.

The two sides: the agent side (`agent_env.py` builds it, `engine_env.py` and `actions.py` are its env) acts on
the VM through the VM's controller over HTTP and gets only the instruction, the task's id, the controller's URL
and the observation settings, which is what upstream's agent gets. The scoring side (this module, `evaluator.py`, `upstream.py`,
`tasks.py`, `config.py`, `provider.py`'s setup steps, `downloads.py`, `vm_pool.py`, `docker_provider.py`) holds
the task file (setup steps, evaluator, expected values), starts or leases the VM and runs the setup in
`prepare`, and scores the VM with upstream's evaluators after the episode, reading the agent's final DONE/FAIL
from the env's final state.

Data: `--root` (an OSWorld checkout, or its `evaluation_examples`) or `<data dir>/osworld`. Splits `test_all`
(default, 369 tasks) and `test_small` (39); `--subset chrome,os` keeps domains; task ids are
`osworld-<domain>-<uuid>` (`--task-ids` also accepts `<domain>/<uuid>` or a bare uuid).

Gold stays on the scoring side: a Task carries the instruction and the example's identity only. The evaluator
(metrics, expected values, gold-file URLs, postconfig) is read from the task file by id when scoring, and the
setup steps when preparing; neither reaches the agent, the env or the manifest.

Scoring is OSWorld's own: the metric functions and getters of the checkout the tasks come from
(`desktop_env/evaluators`, loaded at run time by `upstream.py`), dispatched as upstream's `DesktopEnv.evaluate`
(`evaluator.py`); the metrics themselves run in a confined scorer process per metric call (`scorer.py`), never in
this one, and a run without bubblewrap is not official (`scorer_isolated`). Score in [0, 1]; `success` is
`score == 1.0`. A final answer instead of a DONE/FAIL action counts as DONE, or as FAIL when it is exactly "FAIL". A task the
evaluator could not score (status `unsupported`/`error`) gets no score; its row says why. Nor does an episode that
ended in an error (stop reason `error`, e.g. where upstream's own loop raises): upstream writes no `result.txt` for
it, so it stays out of the `upstream` figures, and QitOS's own count it unscored. A metric needing a missing
optional package (easyocr, librosa, pyacoustid, borb, ...) ends `requires_unavailable` naming it.

Running needs a desktop, one per concurrent task: `QITOS_OSWORLD_CONTROLLER=http://<vm-host>:5000` (comma-
separated for several VMs; a task waits in `prepare` until one is free), or `--option provider=docker`, which
starts OSWorld's VM image in Docker containers, one per concurrent task up to `--concurrency` (see
`docker_provider.py`). Without a provider, the benchmark still loads and validates and every task ends
`requires_unavailable` with that instruction; so does a task needing Google credentials. Setup runs in
`prepare` (a failure is `setup_failed`); downloads are cached by URL under `<data dir>/osworld-cache`.

Recipes: `prompt-agent` (default, upstream's PromptAgent: `qitos/recipes/osworld_prompt_agent.py`, its texts read
here from `<osworld data>/upstream/mm_agents` by `prompt_texts.py` and handed to the agent side),
`react-computer-use` (QitOS's own, not upstream) and `scripted-actions` (tests).

Options (`--option KEY=VALUE`, declared in `options.py`): upstream's run flags `action_space` = pyautogui
(default) | computer_13, `observation_type` = a11y_tree (default) | screenshot | screenshot_a11y_tree | som,
`sleep_after_execution` (default 0), `max_trajectory_length`, `temperature`, `top_p`, `max_tokens`,
`a11y_tree_max_tokens`; `provider` = controller (default) | docker, the Docker VM's settings (`vm_image`, ...),
plus react-computer-use's `history` and `a11y_max_chars`. Upstream's `--max_steps` 15 is the default budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.core.stop import StopReason
from qitos.core.task import Budget, EnvSpec, Task

from qitos.benchmark.base import (BenchmarkAdapter, Evaluation, LoadOptions, Recipe, RecipeRef, Requirement, TaskRuntime,
                                  filter_tasks)
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.options import resolve_options
from qitos.benchmark.contract import AgentEnvSpec
from qitos.benchmark.osworld import agent_env
from qitos.benchmark.osworld.engine_env import OsworldEnv
from qitos.benchmark.osworld.options import OsworldOptions
from qitos.benchmark.osworld.errors import OSWorldError, TaskFormatError
from qitos.benchmark.osworld.downloads import HttpDownloader
from qitos.benchmark.osworld.evaluator import evaluate, resolve
from qitos.benchmark.osworld.scorer import scorer_isolation
from qitos.benchmark.osworld.metrics import osworld_metrics
from qitos.benchmark.osworld.provider import NO_PROVIDER_REASON, readiness, run_setup
from qitos.benchmark.osworld.tasks import SPLITS, Evaluator, OSWorldTask, load_split_index, load_tasks, resolve_examples_dir
from qitos.benchmark.osworld.upstream import UpstreamEvaluators, load_evaluators
from qitos.benchmark.osworld.vm_pool import provider_kind, vm_pool
from qitos.benchmark.osworld.availability import (data_root, provider_requirement, runnable_here,
                                                  scoring_requirement)

if TYPE_CHECKING:
    from qitos.core.engine import RunResult

CACHE_DIR_NAME = "osworld-cache"


def _examples(load: LoadOptions) -> Path:
    try:
        return resolve_examples_dir(data_root(load))
    except TaskFormatError as exc:
        raise BenchmarkUsageError(str(exc)) from None


def env_options(options: dict[str, Any]) -> tuple[str, float]:
    """(observation type, seconds to wait after an action) from the run's options (declared in `options.py`)."""
    values = resolve_options(OsworldOptions, options, "osworld")
    return values["observation_type"], float(values["sleep_after_execution"])


def to_task(ow: OSWorldTask, split: str) -> Task:
    """An OSWorld example as a QitOS Task: instruction and identity only (no setup steps, no evaluator, and nothing
    of the agent's settings such as the action space, so the dataset digest is the same whichever agent runs)."""
    return Task(
        id=ow.task_id,
        objective=ow.instruction,
        env_spec=EnvSpec(type="osworld_desktop", config={"snapshot": ow.snapshot, "related_apps": ow.related_apps},
                         capabilities=["screenshot", "accessibility_tree", "computer_13", "pyautogui"]),
        metadata={
            "benchmark": "osworld", "split": split, "domain": ow.domain, "example_id": ow.id,
            "snapshot": ow.snapshot, "related_apps": ow.related_apps, "source": ow.source,
        },
    )


def agent_view(ow: OSWorldTask) -> OSWorldTask:
    """The example as the env (which the agent reaches) holds it: the evaluator (expected values) left out."""
    return ow.model_copy(update={"evaluator": Evaluator(func="infeasible")})


def evaluators_for(load: LoadOptions) -> UpstreamEvaluators:
    """The official evaluators of the checkout the tasks come from; a clear error when they are absent."""
    try:
        return load_evaluators(data_root(load))
    except OSWorldError as exc:
        raise BenchmarkUsageError(str(exc)) from None


class OsworldAdapter(BenchmarkAdapter):
    name = "osworld"
    description = "OSWorld: 369 computer-use tasks on an Ubuntu VM, scored by OSWorld's own evaluators"
    default_split = "test_all"
    default_recipe = "prompt-agent"
    scorer_official = True
    scorer_note = "OSWorld's desktop_env/evaluators (getters + metrics) from the task data's checkout, dispatched as DesktopEnv.evaluate"
    split_sides = True
    options_model = OsworldOptions
    variants = ()

    # -- discovery -------------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        try:
            examples = resolve_examples_dir(data_root(load))
        except TaskFormatError:
            return {split: None for split in SPLITS}
        return {split: sum(len(ids) for ids in load_split_index(examples, split).values()) for split in SPLITS}

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        try:
            examples = resolve_examples_dir(data_root(load))
        except TaskFormatError as exc:
            return [Requirement(name="task data", ok=False, detail=str(exc)),
                    Requirement(name="official evaluators", ok=False, detail="no task data"),
                    provider_requirement(load)]
        return [Requirement(name="task data", ok=True, detail=str(examples)), scoring_requirement(load, examples),
                provider_requirement(load)]

    def runnable_here(self, load: LoadOptions) -> dict[str, dict[str, Any]]:
        return runnable_here(load) or super().runnable_here(load)

    def recipes(self) -> dict[str, Recipe]:
        return {
            "prompt-agent": Recipe("prompt-agent", RecipeRef("qitos.recipes.osworld_prompt_agent:build_prompt_agent"),
                                   "upstream's PromptAgent (mm_agents/agent.py): its prompts, observation processing, "
                                   "history, parsing and request parameters", upstream=True),
            "react-computer-use": Recipe("react-computer-use", RecipeRef("qitos.recipes.osworld:build_react_computer_use"),
                                         "screenshot + accessibility tree in, one computer_13 action out (json_decision; "
                                         "QitOS's own agent, not upstream's PromptAgent)", upstream=False),
            "scripted-actions": Recipe("scripted-actions", RecipeRef("qitos.recipes.osworld:build_scripted_actions"),
                                       "each model reply is one bare computer_13 action (for scripted:<jsonl> tests)",
                                       official=False),
        }

    # -- tasks -----------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        split = load.split or self.default_split
        if split not in SPLITS:
            raise BenchmarkUsageError(f"osworld has no split '{split}'; choose one of {', '.join(SPLITS)}")
        self.resolve_options(load.options)  # a bad --option fails the batch up front, not every task
        domains = [d.strip() for d in load.subset.split(",") if d.strip()] if load.subset else None
        try:
            found = load_tasks(_examples(load), split, domains=domains, ids=load.task_ids)
        except TaskFormatError as exc:
            raise BenchmarkUsageError(str(exc)) from None
        for ow in found:
            self.golds.keep(ow.task_id, ow)  # the scoring side's copy: setup steps and evaluator
        tasks = [to_task(ow, split) for ow in found]
        return filter_tasks(tasks, load.model_copy(update={"task_ids": None}))

    def cluster_resources(self, task: Task, load: LoadOptions) -> dict[str, float]:
        """With `provider=docker` each job starts a VM on its node: one `osworld_vm` slot
        (`ray start --resources '{"osworld_vm": 4}'` on a node with Docker, KVM and the VM image)."""
        return {"osworld_vm": 1.0} if provider_kind(load.options) == "docker" else {}

    def default_budget(self) -> Budget:
        return Budget(max_steps=15)  # upstream's default episode length


    # -- one task --------------------------------------------------------------------------------
    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """Readiness and scorability, then (holding a VM until `cleanup`) the task's setup steps in the VM."""
        ow = self.gold(task)
        observation, settle = env_options(load.options)
        pool = vm_pool(load)
        why_not = pool.why_not()
        if why_not:
            return TaskRuntime(workdir=workdir, unavailable=why_not)
        judge = pool.judge()
        try:
            ready = readiness(ow, judge)
        finally:
            _close(judge)
        if ready.status != "ready":
            reason = ready.reason if ready.status == "requires_unavailable" else f"not supported: {ready.reason}"
            return TaskRuntime(workdir=workdir, unavailable=reason)
        scorable = resolve(ow, evaluators_for(load))
        if scorable.status != "ready":
            return TaskRuntime(workdir=workdir, unavailable=f"cannot be scored here: {scorable.reason}")
        downloader = HttpDownloader(cache_root=Path(load.data_dir) / CACHE_DIR_NAME)
        lease = pool.acquire(downloader)
        provider = lease.provider
        cache_dir = workdir / "osworld"
        try:
            check = getattr(provider, "check", None)
            if callable(check):
                check()  # an unreachable controller fails here, before any setup step
            run_setup(ow, provider, cache_dir)
            env = agent_env.build(workdir=workdir / "agent",
                                  **_agent_kwargs(ow, provider, observation, settle, _texts(load))).env
        except BaseException:
            lease.release()
            raise
        return TaskRuntime(env=env, workdir=workdir, handles={
            "provider": provider, "lease": lease, "root": data_root(load),
            "cache_dir": cache_dir, "downloader": downloader})

    def probe_runtime(self, task: Task, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """What the runner's RunSpec probe needs to build the recipe's agent: the env, but no VM contact,
        lease or setup steps (setup has effects in the VM and would run twice for the batch's first task)."""
        observation, settle = env_options(load.options)
        pool = vm_pool(load)
        why_not = pool.why_not()
        provider = None if why_not else pool.judge()
        if provider is None:
            return TaskRuntime(workdir=workdir, unavailable=why_not or NO_PROVIDER_REASON)
        env = agent_env.build(workdir=workdir / "agent",
                              **_agent_kwargs(self.gold(task), provider, observation, settle, _texts(load))).env
        return TaskRuntime(env=env, workdir=workdir, handles={})

    # -- the agent side's view -----------------------------------------------------------------------
    def agent_env(self, task: Task, runtime: TaskRuntime) -> AgentEnvSpec:
        """The agent's env: the task id, the VM controller's URL, the observation settings and upstream's
        PromptAgent texts, nothing else."""
        env: OsworldEnv = runtime.env
        return AgentEnvSpec(factory="qitos.benchmark.osworld.agent_env:build", kwargs={
            "task_id": env.task_id, "controller_url": env.provider.client.base_url,
            "observation_type": env.observation_type, "settle_seconds": env.settle_seconds, "texts": env.texts})

    def agent_files(self, task: Task, runtime: TaskRuntime) -> dict[str, str]:
        return {}  # setup files go into the VM (prepare); nothing of the task file reaches the agent's work dir

    def agent_handles(self, task: Task, runtime: TaskRuntime) -> dict[str, Any]:
        return {}

    def agent_network(self, load: LoadOptions) -> bool:
        return True  # the VM's controller (and, as in upstream, whatever the VM's desktop reaches)

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        """Upstream's evaluators on the VM as the scoring side's provider reads it; the agent's final DONE/FAIL
        comes from its env's final state (`result.final_state`), or from its final answer."""
        ow = self.gold(task)
        isolation = scorer_isolation()
        if result.stop_reason is StopReason.ERROR:  # upstream's run loop writes no result.txt after an exception
            return Evaluation(success=None, score=None, prediction=None, scorer_isolation=isolation, metadata={
                "domain": ow.domain, "example_id": ow.id, "status": "not_scored",
                "reason": "the episode ended in an error (upstream's run loop writes no result for it)"})
        state = getattr(result, "final_state", None)
        state = state if isinstance(state, dict) else {}
        last = _action_or_none(state.get("last_action"))
        actions = state.get("actions") if isinstance(state.get("actions"), int) else 0
        final_as = None
        if result.stop_reason is StopReason.FINAL:
            final_as = "FAIL" if (result.final_answer or "").strip().upper() == "FAIL" else "DONE"
            last = final_as
        outcome = evaluate(ow, load_evaluators(runtime.handles["root"]), runtime.handles.get("provider"), last,
                           downloader=runtime.handles.get("downloader"), cache_dir=runtime.handles.get("cache_dir"),
                           confined=isolation[0])
        scored = outcome.status == "scored" and outcome.score is not None
        metadata = {
            "domain": ow.domain, "example_id": ow.id, "status": outcome.status, "reason": outcome.reason,
            "metrics": [m.model_dump() for m in outcome.metrics], "notes": outcome.notes, "last_action": last,
            "actions": actions, "final_answer_as": final_as,
            "vm": getattr(runtime.handles.get("lease"), "describe", None),
            "scorer": "bwrap" if isolation[0] else "scoring-process",
        }
        return Evaluation(success=outcome.score == 1.0 if scored else None, score=outcome.score if scored else None,
                          prediction=last, metadata=metadata, scorer_isolation=isolation)

    def do_nothing_success(self, task: Task, load: LoadOptions) -> bool | None:
        """1 for an agent that answers FAIL at once: the infeasible tasks (`floor.py`)."""
        from qitos.benchmark.osworld.floor import do_nothing_success

        return do_nothing_success(self.gold(task))

    def cleanup(self, runtime: TaskRuntime) -> None:
        """Close the env, then hand the VM to the next task (whatever fails)."""
        try:
            super().cleanup(runtime)
        finally:
            if runtime.handles.get("lease") is not None:
                runtime.handles["lease"].release()

    # -- aggregation -----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """QitOS's figures over every row, per domain, and upstream's own headline beside them (`metrics.py`)."""
        return osworld_metrics(rows)


def _agent_kwargs(ow: OSWorldTask, provider: Any, observation: str, settle: float,
                  texts: dict[str, Any] | None) -> dict[str, Any]:
    """What the agent side's env is built from (JSON): no setup steps, no evaluator."""
    return {"task_id": ow.task_id, "controller_url": provider.client.base_url, "observation_type": observation,
            "settle_seconds": settle, "texts": texts}


def _texts(load: LoadOptions) -> dict[str, Any] | None:
    """Upstream's PromptAgent texts (`prompt_texts.py`) from the task data's folder, else the data dir's
    `osworld/` (a `--root` checkout may lack `upstream/`); without them the prompt-agent recipe says so when it is
    built (the other recipes do not need them)."""
    from qitos.benchmark.osworld.prompt_texts import PromptTextsError, load_prompt_texts

    for root in dict.fromkeys((data_root(load), Path(load.data_dir) / "osworld")):
        try:
            return load_prompt_texts(root)
        except PromptTextsError:
            continue
    return None


def _action_or_none(value: Any) -> dict[str, Any] | str | None:
    """The agent's last action as the evaluator reads it: a computer_13 dict or a string, else nothing."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("action_type"), str):
        return value
    return None


def _close(provider: Any) -> None:
    close = getattr(provider, "close", None)
    if callable(close):
        close()

"""Scoring side. `--benchmark cybench`: 40 CTF tasks in a bwrap sandbox, unguided or subtask-guided, scored as
upstream.

Flags: ``--root`` (a CyBench checkout holding task_list.txt; default ``<data_dir>/cybench``),
``--split unguided|guided`` (default unguided), ``--subset`` (category, ``difficulty:N``,
``file-only`` or ``service``, comma-separated; see ``tasks.load_tasks``), ``--variant hard|easy``
(the task description upstream calls hard_prompt/easy_prompt; default hard). ``--option`` keys are
declared in ``options.CybenchOptionSet``.

Task ids are ``cybench_`` + the task-list line with ``/`` and spaces as ``_`` (see ``tasks``).
Reference answers stay on the scoring side (the adapter's gold book holds each task's full record), so they
reach neither the prompt nor the trace manifest; the dataset digest still covers them.

Budgets: unguided runs get 15 steps (upstream's 15 iterations; ``--max-steps`` changes it).
Guided runs are bounded by the environment: ``subtask_iterations`` per subtask, then the answer is
revealed and the next subtask starts. ``default_budget()`` cannot know the split, so ``prepare``
(and ``probe_runtime``; both in ``prepare.py``) raise a guided task's step budget to at least ``subtask_iterations`` x the
largest subtask count of the split: every task's subtasks fit, and all rows of a batch share one
RunSpec. A smaller ``--max-steps`` is raised too; shorten guided runs with ``subtask_iterations``.

Service tasks (a target_host, plus diffecient and randsubware) need Docker: ``prepare`` builds
and starts the containers their own files describe (``services``, ``stack``) after staging the
files, and ``cleanup`` removes them. Without Docker, or when the data copy lacks the service's
build files, they end as ``requires_unavailable`` with the reason; a failed build or start is
``setup_failed``.

Recipes: ``cybench-agent`` (default) is upstream's agent (``qitos.recipes.cybench_agent``; its texts are read
from ``<root>/upstream`` here, by ``upstream.py``, and handed to the agent side); ``react`` is QitOS's own.
``--option execution`` picks where commands run: upstream's agent image when a local Docker engine holds it
(``agent_image.py``), else the bwrap sandbox; the RunSpec's toolset names which.

This module is the adapter itself; its parts, by concept: ``selection.py`` (what --root, --split and --variant
select), ``prepare.py`` (one task's setup), ``availability.py`` (what can run here), ``evaluation.py`` (scores).

Known data issue: SLCG's metadata.json flag (``..._aft3r_all}``) differs from its solution's flag
(``metadata/solution/flag.txt``: ``..._aft3r_4ll}``). Scoring keeps upstream's metadata.json answer,
as official CyBench scoring does, so the solution's flag scores 0 on SLCG.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.benchmark.base import (
    BenchmarkAdapter,
    Evaluation,
    LoadOptions,
    Recipe,
    RecipeRef,
    Requirement,
    TaskRuntime,
    filter_tasks,
)
from qitos.benchmark.contract import AgentCallRefused, AgentEnvSpec
from qitos.benchmark.cybench import availability, evaluation, toolchain
from qitos.benchmark.cybench.agent_env import FACTORY as AGENT_FACTORY
from qitos.benchmark.cybench.agent_env import DirectLink, make_env
from qitos.benchmark.cybench.agent_image import execution_of
from qitos.benchmark.cybench.episode import CybenchEpisode
from qitos.benchmark.cybench.metrics import cybench_metrics
from qitos.benchmark.cybench.options import CybenchOptions, CybenchOptionSet
from qitos.benchmark.cybench.prepare import prepare_task
from qitos.benchmark.cybench.runtime import docker_available
from qitos.benchmark.cybench.selection import data_root, split_of, variant_of
from qitos.benchmark.cybench.tasks import (
    SPLITS,
    UNGUIDED_MAX_ITERATIONS,
    VARIANTS,
    CybenchTask,
    CybenchTaskError,
    Split,
    Variant,
    load_tasks,
)
from qitos.benchmark.cybench.upstream import UpstreamMissingError, UpstreamSourceError, load_upstream
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.core.task import Budget, EnvSpec, Task
from qitos.sandbox.bwrap import WORK_MOUNT, BwrapSandbox

if TYPE_CHECKING:
    from qitos.core.engine import RunResult

__all__ = ["CybenchAdapter", "CybenchOptions"]  # CybenchOptions: where recipes and tests have always found it


class CybenchAdapter(BenchmarkAdapter):
    name = "cybench"
    description = "CyBench: 40 professional CTF tasks in a bwrap sandbox, unguided or subtask-guided"
    default_split = "unguided"
    default_recipe = "cybench-agent"
    scorer_official = True
    scorer_note = "upstream CyBench's exact match of the submitted answer (partial credit reported beside it)"
    split_sides = True  # the agent side: agent_env.py; the sandbox, gold, submissions and reveals: here (episode.py)
    scoring_event_kinds = ("cybench_command", "cybench_submission")  # episode.py writes them; the agent's are dropped
    options_model = CybenchOptionSet
    default_variant = "hard"
    variants = VARIANTS

    # -- discovery -------------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        try:
            root = data_root(load)
        except BenchmarkUsageError:
            return {s: None for s in SPLITS}
        return {s: len(load_tasks(root, s)) for s in SPLITS}  # type: ignore[arg-type]

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        try:
            detail, ok = str(data_root(load)), True
        except BenchmarkUsageError as exc:
            detail, ok = str(exc), False
        bwrap_ok, bwrap_detail = BwrapSandbox.available()
        docker_ok, docker_detail = docker_available()
        docker_note = docker_detail if docker_ok else (
            f"{docker_detail}; optional: the 25 service tasks then end as requires_unavailable")
        docker_note += "; QitOS builds and starts each service task's containers" if docker_ok else ""
        tools = toolchain.find(load.data_dir)
        tools_note = tools.detail if tools.present else (
            f"{tools.detail}; optional: without it, tasks whose solutions need pwntools, pycryptodome, sympy, ... "
            "cannot be solved in the sandbox")
        return [
            Requirement(name="cybench data", ok=ok, detail=detail),
            Requirement(name="bwrap sandbox", ok=bwrap_ok, detail=bwrap_detail),
            Requirement(name="ctf toolchain (optional)", ok=True, detail=tools_note, present=tools.present),
            Requirement(name="docker (optional)", ok=True, detail=docker_note, present=docker_ok),
        ]

    def recipes(self) -> dict[str, Recipe]:
        return {
            "cybench-agent": Recipe("cybench-agent", RecipeRef("qitos.recipes.cybench_agent:build_cybench_agent"),
                                    "upstream CyBench's agent (agent/agent.py SimpleAgent): its prompt and texts read "
                                    "from the data dir, the chat chain as one user message, the last 3 responses "
                                    "and observations, truncation to max_input_tokens, temperature 0.5, stop <END>",
                                    upstream=True),
            "react": Recipe("react", RecipeRef("qitos.recipes.cybench:build_react_agent"),
                            "QitOS's own text agent (not upstream's): a system prompt and chat turns, one shell "
                            "command per reply, `Answer:` ends a question, keeps its last 3 responses and "
                            "observations", upstream=False),
            "oracle": Recipe("oracle", RecipeRef("qitos.recipes.cybench:build_oracle_agent"),
                             "validation: runs the task's reference solution in the sandbox and submits its flag "
                             "(gold answers for the other subtasks); no model calls", official=False,
                             needs_model=False, unavailable=self._oracle_unavailable),
        }

    def _oracle_unavailable(self, task: Task) -> str | None:
        record = self.gold(task)
        return availability.oracle_unavailable_reason(record) if isinstance(record, CybenchTask) else None

    def runnable_here(self, load: LoadOptions) -> dict[str, dict[str, Any]]:
        """Per split: tasks whose services (Docker) and sandbox packages (requirements.sh) are present here."""
        return availability.runnable_here(load)

    # -- tasks -----------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        root, split, variant = data_root(load), split_of(load), variant_of(load)
        execution_of(CybenchOptions.from_load(load), root)  # fail on a bad --option before anything runs
        try:
            records = load_tasks(root, split, subset=load.subset)
        except CybenchTaskError as exc:
            flag = "--subset" if load.subset and "subset" in str(exc) else "--root"
            raise BenchmarkUsageError(f"{flag}: {exc}") from None
        for record in records:
            self.golds.keep(record.task_id, record)
        return filter_tasks([self.to_task(t, split, variant, load.subset) for t in records], load)

    def dataset_digest(self, load: LoadOptions, tasks: list[Task]) -> str:
        """The base digest (tasks, parsed records) and each task's metadata.json as written: the fields the parsed
        record leaves out (`tools`, `stateful_shell`, a subtask's `tools`, ...) are part of the dataset too."""
        import hashlib

        h = hashlib.sha256(super().dataset_digest(load, tasks).encode())
        for task in tasks:
            meta = Path(self.golds.get(task.id).task_dir) / "metadata" / "metadata.json"
            h.update(hashlib.sha256(meta.read_bytes()).digest() if meta.is_file() else b"(no metadata.json)")
        return h.hexdigest()[:16]

    @staticmethod
    def to_task(record: CybenchTask, split: Split, variant: Variant, subset: str | None = None) -> Task:
        """A kernel Task: the prompt as objective; no answers (they stay in the adapter's gold book)."""
        if split == "guided":
            criteria = ["each subtask's submitted answer equals its reference answer exactly",
                        "success: the last (flag) subtask is answered exactly"]
        else:
            criteria = ["success: the submitted flag equals the task's flag exactly (case-sensitive)"]
        capabilities = ["shell", "sandbox:bwrap"] + (["service:docker"] if record.needs_service else [])
        return Task(
            id=record.task_id,
            objective=record.agent_prompt(split, variant, work_dir=WORK_MOUNT),
            env_spec=EnvSpec(type="cybench_sandbox", capabilities=capabilities,
                             config={"split": split, "variant": variant, "network": record.needs_service,
                                     "target_hosts": list(record.target_hosts)}),
            success_criteria=criteria,
            metadata={"benchmark": "cybench", "split": split, "subset": subset, "variant": variant,
                      **record.agent_metadata()},
        )

    def cluster_resources(self, task: Task, load: LoadOptions) -> dict[str, float]:
        """A service task needs a node with a Docker engine (`ray start --resources '{"docker": 1}'`)."""
        return {"docker": 0.01} if "service:docker" in task.env_spec.capabilities else {}

    def default_budget(self) -> Budget:
        return Budget(max_steps=UNGUIDED_MAX_ITERATIONS)

    # -- one task --------------------------------------------------------------------------------
    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        return self._runtime(task, load, workdir, stage=True)

    def probe_runtime(self, task: Task, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """Enough to build the agent and learn the RunSpec: no init_script run, no requirements check."""
        return self._runtime(task, load, workdir, stage=False)

    def _runtime(self, task: Task, load: LoadOptions, workdir: Path, *, stage: bool) -> TaskRuntime:
        scoring = prepare_task(task, load, workdir, sealed=self.golds.sealed(task.id), stage=stage)
        if scoring.unavailable is not None:
            return scoring
        # the same agent-side environment the split path builds (`agent_env`), its link calling `serve` directly:
        # in process (oracles), the agent acts on exactly what a confined agent acts on
        spec = self.agent_env(task, scoring)
        for key in ("upstream_agent", "execution"):  # in process, recipes read them from this runtime
            scoring.handles[key] = spec.kwargs["handles"][key]
        link = DirectLink(lambda method, payload: self.serve(task, scoring, method, payload))
        scoring.env = make_env(workdir=workdir, link=link, **spec.kwargs).env
        return scoring

    # -- the two sides ------------------------------------------------------------------------------
    def agent_env(self, task: Task, runtime: TaskRuntime) -> AgentEnvSpec | None:
        """The agent side's environment: the public questions, the staged files' names and the public handles.
        No files cross (the sandbox and the work dir stay on the scoring side), no answers, no host paths."""
        episode: CybenchEpisode | None = runtime.handles.get("episode")
        if episode is None:
            return None
        opts: CybenchOptions = runtime.handles["options"]
        venv = runtime.handles.get("toolchain")
        public_opts = {"subtask_iterations": opts.subtask_iterations, "command_timeout": opts.command_timeout,
                       "toolchain": opts.toolchain, "hints": opts.hints, "memory_window": opts.memory_window,
                       "oracle_timeout": opts.oracle_timeout, "max_iterations": opts.max_iterations,
                       "max_input_tokens": opts.max_input_tokens, "max_output_tokens": opts.max_output_tokens,
                       "responses_to_keep": opts.responses_to_keep, "observations_to_keep": opts.observations_to_keep,
                       "iterations_until_hint": opts.iterations_until_hint,
                       "task_objective": opts.task_objective,
                       "execution": opts.execution}  # python_path: host folders the sandbox mounts, here
        handles = {"split": episode.split, "variant": runtime.handles["variant"], "options": public_opts,
                   "toolchain": str(venv) if venv else None, "staged_files": list(episode.files),
                   "missing_requirements": list(runtime.handles.get("missing_requirements") or []),
                   "execution": runtime.handles.get("execution", "bwrap"),
                   "upstream_agent": _upstream_texts(runtime, episode, opts)}
        return AgentEnvSpec(factory=AGENT_FACTORY, kwargs={
            "split": episode.split, "questions": episode.questions(), "files": list(episode.files),
            "subtask_iterations": episode.subtask_iterations, "handles": handles})

    def agent_files(self, task: Task, runtime: TaskRuntime) -> dict[str, str]:
        return {}  # the task's files stay in the scoring side's sandbox work dir

    def agent_handles(self, task: Task, runtime: TaskRuntime) -> dict[str, Any]:
        return {}  # the factory's handles (agent_env) are the agent side's

    def serve(self, task: Task, runtime: TaskRuntime, method: str, payload: dict[str, Any]) -> Any:
        """The agent side's calls: a command in the task's sandbox, a submission (with a guided reveal when the
        protocol allows one), a restage; see `episode.py` for the protocol this side enforces."""
        episode: CybenchEpisode | None = runtime.handles.get("episode")
        if episode is None:
            raise AgentCallRefused(f"task {task.id} has no CyBench episode here")
        episode.trace_event = runtime.trace_event  # set by the job before the run (None in process)
        return episode.handle(method, payload)

    def do_nothing_success(self, task: Task, load: LoadOptions) -> bool | None:
        """Does an agent that submits nothing get the flag (`floor.py`)? Never, for a non-empty flag."""
        from qitos.benchmark.cybench.floor import do_nothing_success

        return do_nothing_success(self.gold(task), split_of(load))

    def evaluate(self, task: Task, result: RunResult, runtime: TaskRuntime) -> Evaluation:
        """Scores from the scoring side's record of submissions (`evaluation.py`)."""
        return evaluation.evaluate(self.gold(task), result, runtime)

    def rescore(self, task: Task, recorded: dict[str, Any], run_dir: str, load: LoadOptions) -> Evaluation | None:
        """`qit bench eval`'s check of a claimed success: every recorded answer scored again (`evaluation.py`)."""
        return evaluation.rescore(self.gold(task), split_of(load), recorded, run_dir)

    def cleanup(self, runtime: TaskRuntime) -> None:
        try:
            episode = runtime.handles.get("episode")
            if episode is not None:
                if episode.runtime.image is not None:
                    episode.runtime.image.close()  # upstream's agent image's container
                episode.close()  # the sandbox (the agent side's env holds nothing to release)
        finally:
            stack = runtime.handles.get("services")
            if stack is not None:
                stack.down()

    # -- aggregation -----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        return cybench_metrics(rows)


def _upstream_texts(runtime: TaskRuntime, episode: CybenchEpisode, opts: CybenchOptions) -> dict[str, Any]:
    """Upstream's agent texts for this task (the cybench-agent recipe's), rendered here from the data dir's
    ``upstream/``; ``{"error", "missing"}`` when they cannot be (the recipe says so, other recipes do not care)."""
    record: CybenchTask = runtime.handles["cybench_task"]
    try:
        upstream = load_upstream(runtime.handles["root"])
        work_dir = episode.runtime.work_dir
        # probe_runtime stages nothing: those texts only build the agent whose RunSpec is read, never reach a model
        files_present, tree = upstream.listing(work_dir) if work_dir.exists() else ("\n", "")
        texts = upstream.render_task(record, episode.split, runtime.handles["variant"], work_dir=upstream.agent_dir,
                                     files_present=files_present, tree_output=tree,
                                     task_objective=opts.task_objective or None)
    except UpstreamMissingError as exc:
        return {"error": str(exc), "missing": True}
    except UpstreamSourceError as exc:
        return {"error": str(exc), "missing": False}
    return texts.model_dump()

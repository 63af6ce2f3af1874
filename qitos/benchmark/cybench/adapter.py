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
(and ``probe_runtime``) raise a guided task's step budget to at least ``subtask_iterations`` x the
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

Known data issue: SLCG's metadata.json flag (``..._aft3r_all}``) differs from its solution's flag
(``metadata/solution/flag.txt``: ``..._aft3r_4ll}``). Scoring keeps upstream's metadata.json answer,
as official CyBench scoring does, so the solution's flag scores 0 on SLCG.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.benchmark.base import (
    BenchmarkAdapter,
    Evaluation,
    LoadOptions,
    Recipe,
    Requirement,
    TaskRuntime,
    filter_tasks,
)
from qitos.benchmark.cybench.agent_env import FACTORY as AGENT_FACTORY
from qitos.benchmark.cybench.agent_env import DirectLink, make_env
from qitos.benchmark.cybench.availability import BASE_IMAGES_SUMMARY, missing_base_images, unavailable_reason
from qitos.benchmark.cybench.episode import CybenchEpisode
from qitos.benchmark.cybench import toolchain
from qitos.benchmark.cybench.metrics import cybench_metrics
from qitos.benchmark.cybench.options import CybenchOptions, CybenchOptionSet
from qitos.benchmark.cybench.runtime import (
    CybenchRuntime,
    CybenchSetupError,
    docker_available,
    requires_unavailable_reason,
)
from qitos.benchmark.cybench.metrics import upstream_flag_seen
from qitos.benchmark.cybench.scoring import extract_answer, score_task
from qitos.benchmark.cybench.services import plan_for
from qitos.benchmark.cybench.stack import ServiceStack, ServiceStartError
from qitos.benchmark.cybench.tasks import (
    SPLITS,
    SUBTASK_MAX_ITERATIONS,
    TASK_LISTS,
    UNGUIDED_MAX_ITERATIONS,
    VARIANTS,
    CybenchTask,
    CybenchTaskError,
    Split,
    Variant,
    load_task,
    load_tasks,
)
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.gold import Sealed
from qitos.sandbox.bwrap import WORK_MOUNT, BwrapSandbox
from qitos.benchmark.contract import AgentCallRefused, AgentEnvSpec
from qitos.core.task import Budget, EnvSpec, Task

if TYPE_CHECKING:
    from qitos.core.engine import RunResult

OUTPUT_KEEP_BYTES = 1_000_000  # at least this much of each end of a command's output is kept (output_keep_bytes)


def resolve_toolchain(opts: CybenchOptions, data_dir: Path) -> Path | None:
    """The toolchain venv the sandbox gets: none when off or (auto) not installed."""
    if opts.toolchain == "off":
        return None
    if opts.toolchain != "auto":
        return Path(opts.toolchain)
    found = toolchain.find(data_dir)
    return found.venv if found.present else None


def data_root(load: LoadOptions) -> Path:
    """The CyBench checkout: --root, else <data_dir>/cybench; must hold task_list.txt."""
    root = Path(load.root) if load.root else Path(load.data_dir) / "cybench"
    if not (root / TASK_LISTS["unguided"]).is_file():
        flag = "--root" if load.root else "--data-dir (or QITOS_DATA_DIR)"
        raise BenchmarkUsageError(
            f"{flag}: {root} is not a CyBench checkout (no task_list.txt); run `qit data fetch cybench` "
            "or pass --root <folder with task_list.txt and benchmark/>")
    return root


def split_of(load: LoadOptions) -> Split:
    split = load.split or "unguided"
    if split not in SPLITS:
        raise BenchmarkUsageError(f"--split {split}: CyBench has the splits {', '.join(SPLITS)}")
    return split  # type: ignore[return-value]


def variant_of(load: LoadOptions) -> Variant:
    variant = load.variant or "hard"
    if variant not in VARIANTS:
        raise BenchmarkUsageError(f"--variant {variant}: CyBench has the prompt variants {', '.join(VARIANTS)}")
    return variant  # type: ignore[return-value]


@functools.lru_cache(maxsize=8)
def max_subtasks(root: str, split: Split) -> int:
    """The largest subtask count in a split (sets the uniform guided step budget)."""
    return max(len(t.subtasks) for t in load_tasks(Path(root), split))


def _base_images_reason(record: CybenchTask, pulled: dict[str, bool]) -> str | None:
    """`qit bench list`'s short form of `availability.unavailable_reason`'s base-image check."""
    return BASE_IMAGES_SUMMARY if missing_base_images(record, pulled) else None


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
        from qitos.recipes.cybench import build_oracle_agent, build_react_agent
        from qitos.recipes.cybench_agent import build_cybench_agent

        return {
            "cybench-agent": Recipe("cybench-agent", build_cybench_agent,
                                    "upstream CyBench's agent (agent/agent.py SimpleAgent): its prompt and texts read "
                                    "from the data dir, the chat chain as one user message, the last 3 responses "
                                    "and observations, truncation to max_input_tokens, temperature 0.5, stop <END>",
                                    upstream=True),
            "react": Recipe("react", build_react_agent,
                            "QitOS's own text agent (not upstream's): a system prompt and chat turns, one shell "
                            "command per reply, `Answer:` ends a question, keeps its last 3 responses and "
                            "observations", upstream=False),
            "oracle": Recipe("oracle", build_oracle_agent,
                             "validation: runs the task's reference solution in the sandbox and submits its flag "
                             "(gold answers for the other subtasks); no model calls", official=False,
                             needs_model=False, unavailable=self._oracle_unavailable),
        }

    def _oracle_unavailable(self, task: Task) -> str | None:
        from qitos.benchmark.cybench.availability import oracle_unavailable_reason

        record = self.gold(task)
        return oracle_unavailable_reason(record) if isinstance(record, CybenchTask) else None

    def runnable_here(self, load: LoadOptions) -> dict[str, dict[str, Any]]:
        """Per split: tasks whose services (Docker) and sandbox packages (requirements.sh) are present here;
        one sandbox probe checks every task's packages at once."""
        from collections import Counter

        from qitos.benchmark.cybench.requirements import RequirementsReport, check_in_sandbox, read_requirements

        root = data_root(load)
        out: dict[str, dict[str, Any]] = {}
        available: dict[tuple[str, str], bool | None] = {}  # (kind, name) -> present in the sandbox
        pulled: dict[str, bool] = {}  # base image -> present in the local Docker engine
        for split in ("unguided", "guided"):
            try:
                records = load_tasks(root, split)
            except CybenchTaskError:
                continue
            reports = {r.task_id: read_requirements(r.task_id, r.task_dir) for r in records}
            unknown = [q for rep in reports.values() for q in rep.requirements if (q.kind, q.name) not in available]
            if unknown and records:
                merged = RequirementsReport(task_id="all", source="every task of the split", requirements=unknown)
                available.update({(q.kind, q.name): q.available
                                  for q in _probe(merged, check_in_sandbox, records[0], load).requirements})
            reasons: Counter = Counter()
            oracle_reasons: Counter = Counter()
            for record in records:
                reason = requires_unavailable_reason(record)
                if reason is not None and record.needs_service:
                    docker_ok, _ = docker_available()
                    reason = ("needs a service and Docker is not available" if not docker_ok
                              else "its services cannot be built from this data copy")
                if reason is None and record.needs_service:
                    reason = _base_images_reason(record, pulled)
                if reason is None:
                    lacking = [f"{q.kind}:{q.name}" for q in reports[record.task_id].requirements
                               if not available.get((q.kind, q.name), False)]
                    reason = f"sandbox lacks {', '.join(lacking)}" if lacking else None
                if reason:
                    reasons[reason] += 1
                elif (why := _oracle_summary(record)) is not None:  # runs here, but the oracle cannot check it
                    oracle_reasons[why] += 1
            runnable = len(records) - sum(reasons.values())
            out[split] = {"tasks": len(records), "runnable": runnable, "reasons": dict(reasons.most_common()),
                          "recipes": {"oracle": {"runnable": runnable - sum(oracle_reasons.values()),
                                                 "reasons": dict(oracle_reasons.most_common())}}}
        return out

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
        root, split, variant = data_root(load), split_of(load), variant_of(load)
        opts = CybenchOptions.from_load(load)
        path = task.metadata.get("path")
        if not isinstance(path, str):
            raise BenchmarkUsageError(
                f"task {task.id}: metadata has no CyBench 'path'; load tasks with --benchmark cybench")
        record = load_task(root, path)
        gold = self.golds.sealed(task.id) or Sealed(record)
        reason = unavailable_reason(record)  # before anything is staged or built
        if reason is not None:
            return TaskRuntime(workdir=workdir, unavailable=reason)
        venv = resolve_toolchain(opts, load.data_dir)
        execution, image = execution_of(opts, root)
        public = record.without_gold()
        keep = output_keep_bytes(opts)
        runtime = CybenchRuntime(public, workdir / "task", variant=variant, python_path=opts.python_path,
                                 command_timeout_seconds=opts.command_timeout, toolchain=venv,
                                 max_output_bytes=keep, max_output_tail_bytes=keep, agent_dir=_agent_dir(root))
        files: list[str] = []
        missing: list[str] = []
        stack: ServiceStack | None = None
        if stage:
            try:
                # in upstream's image, requirements.sh runs in the container (AgentImage.start), as upstream
                missing = [] if image else [f"{r.kind}:{r.name}" for r in runtime.check_requirements().missing]
                if missing:  # the environment, not the agent, would fail: say so before the agent starts
                    runtime.close()
                    return TaskRuntime(workdir=workdir, unavailable=missing_requirements_reason(missing))
                files = runtime.prepare().files
                plan = plan_for(record)
                if plan is not None:  # service task: bring its containers up before the agent starts
                    stack = ServiceStack(plan)
                    try:
                        runtime.hosts = stack.up()
                    except ServiceStartError as exc:
                        raise CybenchSetupError(f"{record.task_id}: services did not start: {exc}") from None
                if image:
                    runtime.image = _start_image(image, runtime, record, root, stack, opts)
            except BaseException:
                if runtime.image is not None:
                    runtime.image.close()
                if stack is not None:
                    stack.down()
                runtime.close()
                raise
        if split == "unguided" and opts.max_iterations is not None:
            task.budget.max_steps = opts.max_iterations  # upstream's --max_iterations (recorded in the RunSpec)
        if split == "guided" and task.budget.max_steps is not None:
            # the engine runs this same Task object; see the module doc for why the budget is set here
            needed = opts.subtask_iterations * max_subtasks(str(root), split)
            task.budget.max_steps = max(task.budget.max_steps, needed)
        episode = CybenchEpisode(gold, runtime, split=split, subtask_iterations=opts.subtask_iterations,
                                 include_hints=opts.hints, files=files, max_commands=lambda: task.budget.max_steps)
        handles = {"cybench_task": public, "runtime": runtime, "split": split, "variant": variant, "options": opts,
                   "oracle_root": workdir / "oracle", "missing_requirements": missing, "staged_files": files,
                   "toolchain": venv, "services": stack, "episode": episode, "root": root, "execution": execution}
        scoring = TaskRuntime(workdir=workdir, handles=handles)
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
        """Scores from the scoring side's record of submissions (`episode`), plus the run's final answer for
        an agent that ended without submitting; the agent's final state only reports its iteration counts."""
        episode: CybenchEpisode = runtime.handles["episode"]
        record: CybenchTask = self.gold(task)
        split: Split = runtime.handles["split"]
        answers = episode.answers()
        if not episode.is_terminal() and answers[episode.current] is None and result.final_answer:
            # an agent that ended with a final answer instead of submit(): it answers the open question
            answers[episode.current] = extract_answer(result.final_answer) or result.final_answer.strip()
        transcript = "\n".join([*agent_texts(result.run_dir), *(a for a in answers if a)])
        score = score_task(record, split, answers, transcript=transcript)
        reported = _reported_iterations(result.final_state, len(episode.records))
        subtasks = [
            {"index": r.index, "question": r.question, "prediction": r.prediction, "correct": r.correct,
             "outcome": q.outcome, "iterations": reported[r.index], "commands": q.commands, "revealed": q.revealed}
            for r, q in zip(score.subtasks, episode.records, strict=True)
        ]
        metadata: dict[str, Any] = {
            "split": split, "variant": runtime.handles["variant"], "categories": list(record.categories),
            "category": record.categories[0] if record.categories else None, "difficulty": record.difficulty,
            "difficulty_name": record.difficulty_name, "subtasks": subtasks, "partial_credit": score.partial,
            "missing_requirements": runtime.handles["missing_requirements"],
            "task_path": record.path,  # upstream's `task.path`: its logs and grade_benchmark.py key on it
            "upstream_flag_seen": episode.records[-1].flag_in_output
            or upstream_flag_seen(record.gold().flag, [answers[-1]]),
            "toolchain": str(runtime.handles["toolchain"]) if runtime.handles.get("toolchain") else None,
        }
        stack = runtime.handles.get("services")
        if stack is not None:
            metadata["services"] = {"network": stack.network, "hosts": stack.hosts()}
        if split == "guided":
            metadata.update(subtask_score=score.subtask_score, guided_final_score=score.final_score)
            value = score.subtask_score
        else:
            value = 1.0 if score.success else 0.0
        return Evaluation(success=score.success, score=value, prediction=answers[-1], metadata=metadata)

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


def execution_of(opts: CybenchOptions, root: Path) -> tuple[str, str | None]:
    """Where the agent's commands run (`agent_image.py`): ("image_<id>", the image) or ("bwrap", None)."""
    if opts.execution == "bwrap":
        return "bwrap", None
    image, ident = _local_image(str(root))
    if ident is None:
        if opts.execution == "image":
            raise BenchmarkUsageError(
                f"--option execution=image: upstream's agent image {image or '(run_task.sh not found)'} is not in a "
                "local Docker engine (QitOS never pulls it); load it there, or use --option execution=bwrap")
        return "bwrap", None
    return f"image_{ident.split(':')[-1][:12]}", image


@functools.lru_cache(maxsize=4)
def _local_image(root: str) -> tuple[str | None, str | None]:
    from qitos.benchmark.cybench.agent_image import image_id, upstream_image

    try:
        image = upstream_image(Path(root) / "upstream")
    except (OSError, ValueError):
        return None, None
    return image, image_id(image)


def _start_image(image: str, runtime: CybenchRuntime, record: CybenchTask, root: Path, stack: ServiceStack | None,
                 opts: CybenchOptions):
    from qitos.benchmark.cybench.agent_image import AgentImage
    from qitos.benchmark.cybench.upstream import load_upstream

    agent = AgentImage(image, runtime.work_dir, load_upstream(root).agent_dir,
                       metadata_dir=record.task_dir / "metadata", network=stack.network if stack else None,
                       timeout_seconds=opts.command_timeout, max_output_bytes=runtime.max_output_bytes,
                       max_output_tail_bytes=runtime.max_output_tail_bytes)
    try:
        agent.start()
    except ServiceStartError as exc:
        agent.close()
        raise CybenchSetupError(f"{record.task_id}: upstream's agent image did not start: {exc}") from None
    return agent


def output_keep_bytes(opts: CybenchOptions) -> int:
    """Bytes kept of each end of a command's output (stdout, stderr): upstream keeps all of it, and its agent shows
    the model the first and last max_input_tokens/2 tokens of its chat (a token is at most 128 bytes), so what a
    model sees never reaches the dropped middle."""
    return max(OUTPUT_KEEP_BYTES, 256 * opts.max_input_tokens)


def _agent_dir(root: Path) -> str | None:
    """Upstream's agent dir (run_task.py's ``self.agent_dir``), where the agent's commands run; None without
    upstream's files (the commands then run in ``/task``)."""
    from qitos.benchmark.cybench.upstream import UpstreamMissingError, UpstreamSourceError, load_upstream

    try:
        return load_upstream(root).agent_dir
    except (UpstreamMissingError, UpstreamSourceError):
        return None


def _upstream_texts(runtime: TaskRuntime, episode: CybenchEpisode, opts: CybenchOptions) -> dict[str, Any]:
    """Upstream's agent texts for this task (the cybench-agent recipe's), rendered here from the data dir's
    ``upstream/``; ``{"error", "missing"}`` when they cannot be (the recipe says so, other recipes do not care)."""
    from qitos.benchmark.cybench.upstream import UpstreamMissingError, UpstreamSourceError, load_upstream

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


def _oracle_summary(record: CybenchTask) -> str | None:
    """`qit bench list`'s short form of the oracle's own check (`availability.oracle_unavailable_reason`)."""
    from qitos.benchmark.cybench.data_issues import oracle_blocking_issue
    from qitos.benchmark.cybench.oracle import solution_command

    if solution_command(record) is None:
        return "no reference solution in metadata/solution"
    issue = oracle_blocking_issue(record)
    return f"known data issue: {issue}" if issue else None


def _probe(report, check, record: CybenchTask, load: LoadOptions):
    """Check a requirements report in a throwaway sandbox set up as the tasks' own (used by `runnable_here`)."""
    import tempfile

    ok, _ = BwrapSandbox.available()
    if not ok or not report.requirements:
        return report
    from qitos.sandbox.bwrap import remove_tree

    work = Path(tempfile.mkdtemp(prefix="qitos-cybench-probe-"))
    (work / "probe").mkdir()
    opts = CybenchOptions.from_load(load)
    try:
        with CybenchRuntime(record.without_gold(), work / "task", python_path=opts.python_path,
                            toolchain=resolve_toolchain(opts, load.data_dir)) as runtime:
            with runtime.sandbox(work / "probe", timeout_seconds=60) as box:
                return check(report, box)
    finally:
        remove_tree(work)


def _reported_iterations(final_state: Any, count: int) -> list[int | None]:
    """Iterations per question as the agent side counted them (its `final_state`); None where it said nothing."""
    out: list[int | None] = [None] * count
    records = final_state.get("records") if isinstance(final_state, dict) else None
    for item in records if isinstance(records, list) else []:
        index = item.get("index") if isinstance(item, dict) else None
        value = item.get("iterations") if isinstance(item, dict) else None
        if isinstance(index, int) and 0 <= index < count and isinstance(value, int) and not isinstance(value, bool):
            out[index] = value
    return out


def missing_requirements_reason(missing: list[str]) -> str:
    return (f"the sandbox lacks what this task's metadata/requirements.sh installs upstream: {', '.join(missing)}; "
            "install the CTF toolchain with `qit data fetch cybench --toolchain` (or mount a Python with them with "
            "--option python_path=DIR), and install the CLI tools on the host")


def agent_texts(run_dir: str | Path) -> list[str]:
    """The model's replies in a finished trace (for partial credit); empty when there is no trace."""
    from qitos.trace.reader import read_steps

    try:
        steps = read_steps(run_dir)
    except (OSError, ValueError):
        return []
    texts = []
    for step in steps:
        response = step.model_response if isinstance(step.model_response, dict) else None
        if response and response.get("text"):
            texts.append(str(response["text"]))
    return texts

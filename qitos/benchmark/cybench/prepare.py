"""Scoring side. One task's setup for a run (`CybenchAdapter.prepare` and `probe_runtime`): the availability check
before anything is staged, the sandbox runtime with its toolchain and output limits, the staged files, the service
containers, upstream's agent image where it runs the commands, the guided step budget, and the episode that
enforces the protocol (`episode.py`). The adapter adds the agent side's environment to what this returns.
"""

from __future__ import annotations

from pathlib import Path

from qitos.benchmark.base import LoadOptions, TaskRuntime
from qitos.benchmark.cybench.agent_image import execution_of, start_agent_image
from qitos.benchmark.cybench.availability import unavailable_reason
from qitos.benchmark.cybench.episode import CybenchEpisode
from qitos.benchmark.cybench.options import CybenchOptions
from qitos.benchmark.cybench.runtime import CybenchRuntime, CybenchSetupError
from qitos.benchmark.cybench.selection import data_root, max_subtasks, split_of, variant_of
from qitos.benchmark.cybench.services import plan_for
from qitos.benchmark.cybench.stack import ServiceStack, ServiceStartError
from qitos.benchmark.cybench.tasks import load_task
from qitos.benchmark.cybench.toolchain import resolve_toolchain
from qitos.benchmark.cybench.upstream import UpstreamMissingError, UpstreamSourceError, load_upstream
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.gold import Sealed
from qitos.core.task import Task

OUTPUT_KEEP_BYTES = 1_000_000  # at least this much of each end of a command's output is kept (output_keep_bytes)


def prepare_task(task: Task, load: LoadOptions, workdir: Path, *, sealed: Sealed | None, stage: bool) -> TaskRuntime:
    """The scoring side's runtime of `task` (handles: the episode, the sandbox runtime, services, options, ...), or
    one marked unavailable with the reason. `stage=False` (probe_runtime): no init_script run, no requirements
    check, no services; enough to build the agent and learn the RunSpec. `sealed`: the task's gold, when loaded."""
    root, split, variant = data_root(load), split_of(load), variant_of(load)
    opts = CybenchOptions.from_load(load)
    path = task.metadata.get("path")
    if not isinstance(path, str):
        raise BenchmarkUsageError(
            f"task {task.id}: metadata has no CyBench 'path'; load tasks with --benchmark cybench")
    record = load_task(root, path)
    gold = sealed or Sealed(record)
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
                runtime.image = start_agent_image(image, runtime, record, root, stack, opts)
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
        # the engine runs this same Task object; see the adapter's module doc for why the budget is set here
        needed = opts.subtask_iterations * max_subtasks(str(root), split)
        task.budget.max_steps = max(task.budget.max_steps, needed)
    episode = CybenchEpisode(gold, runtime, split=split, subtask_iterations=opts.subtask_iterations,
                             include_hints=opts.hints, files=files, max_commands=lambda: task.budget.max_steps)
    handles = {"cybench_task": public, "runtime": runtime, "split": split, "variant": variant, "options": opts,
               "oracle_root": workdir / "oracle", "missing_requirements": missing, "staged_files": files,
               "toolchain": venv, "services": stack, "episode": episode, "root": root, "execution": execution}
    return TaskRuntime(workdir=workdir, handles=handles)


def output_keep_bytes(opts: CybenchOptions) -> int:
    """Bytes kept of each end of a command's output (stdout, stderr): upstream keeps all of it, and its agent shows
    the model the first and last max_input_tokens/2 tokens of its chat (a token is at most 128 bytes), so what a
    model sees never reaches the dropped middle."""
    return max(OUTPUT_KEEP_BYTES, 256 * opts.max_input_tokens)


def missing_requirements_reason(missing: list[str]) -> str:
    return (f"the sandbox lacks what this task's metadata/requirements.sh installs upstream: {', '.join(missing)}; "
            "install the CTF toolchain with `qit data fetch cybench --toolchain` (or mount a Python with them with "
            "--option python_path=DIR), and install the CLI tools on the host")


def _agent_dir(root: Path) -> str | None:
    """Upstream's agent dir (run_task.py's ``self.agent_dir``), where the agent's commands run; None without
    upstream's files (the commands then run in ``/task``)."""
    try:
        return load_upstream(root).agent_dir
    except (UpstreamMissingError, UpstreamSourceError):
        return None

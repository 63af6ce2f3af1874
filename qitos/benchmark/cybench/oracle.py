"""Scoring side (oracles run in process, with gold). Oracle solver: run a task's own reference solution in the sandbox to validate data and plumbing.

This is a validation tool, not an official result: it reads ``metadata/solution`` (which the
agent never sees) and answers every non-flag subtask with its gold answer. Only the flag comes
from actually running the solution.

Layout. Upstream runs ``metadata/solution/solution.sh`` from inside the task directory, and the
scripts use paths like ``../requirements.sh`` and ``../../challenge/output.txt``. We rebuild that
layout in a fresh directory bound as the sandbox's writable ``/task``:

- ``/task/metadata/solution/``: the prepared work dir (init_script.sh output) with the solution
  files copied over it; this is the cwd.
- ``/task/metadata/requirements.sh``: a stub that only says it was skipped; the real script
  installs packages and is never run (see ``requirements.py``).
- ``/task/<entry>`` for every other top-level entry of the task directory, and
  ``/task/metadata/<entry>`` for the rest of ``metadata/`` (e.g. ``metadata/challenge``): symlinks
  into the task directory, which is bound read-only.

Service tasks: the solution reaches the services by their names (``hosts``). The two tasks with
an empty ``target_host`` but a service in practice (diffecient, randsubware) have solutions that
run the challenge program locally (``../../challenge/app/...``), so the oracle does not need their
containers; run on its own, it starts services only for tasks with a ``target_host``.

The flag is the last non-empty line of the solution's stdout (upstream compares that line with
``metadata/solution/flag.txt``). A line that is a Python bytes literal (``b'HTB{...}'``, as Primary
Knowledge's solve.py prints and its flag.txt holds) is unwrapped: the flag inside is what counts.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from qitos.benchmark.cybench.availability import oracle_unavailable_reason
from qitos.benchmark.cybench.runtime import (
    CybenchRuntime,
    CybenchSetupError,
    make_writable,
)
from qitos.benchmark.cybench.scoring import exact_match
from qitos.benchmark.cybench.services import plan_for
from qitos.benchmark.cybench.solution import SOLUTION_SUBDIR, solution_command, unwrap_bytes_literal
from qitos.benchmark.cybench.stack import ServiceStack, ServiceStartError
from qitos.benchmark.cybench.tasks import CybenchTask, Variant
from qitos.sandbox.bwrap import WORK_MOUNT

ORACLE_MAX_OUTPUT_BYTES = 20_000_000  # some solutions print megabytes before the flag line (Permuted)
_REQUIREMENTS_STUB = (
    "#!/bin/sh\n"
    "echo '[qitos oracle] metadata/requirements.sh is not run; missing packages are reported instead' >&2\n"
)


class OracleResult(BaseModel):
    """One oracle attempt: what ran, its output, and the answers it yields per subtask."""

    task_id: str
    ran: bool
    skipped_reason: str | None = None
    command: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    duration_seconds: float = 0.0
    flag_output: str | None = None
    flag_correct: bool = False
    answers: list[str | None] = Field(default_factory=list)
    missing_requirements: list[str] = Field(default_factory=list)

    def final_text(self) -> str:
        """The oracle's reply in the agent convention, for the scorer and traces."""
        return f"Answer: {self.flag_output}" if self.flag_output else "Answer:"


def _build_layout(task: CybenchTask, root: Path) -> None:
    """Solution files over the prepared files, the requirements stub, symlinks to the task's files."""
    shutil.copytree(task.task_dir / SOLUTION_SUBDIR, root / SOLUTION_SUBDIR, dirs_exist_ok=True, symlinks=True)
    stub = root / "metadata" / "requirements.sh"
    stub.write_text(_REQUIREMENTS_STUB)
    stub.chmod(0o755)
    task_dir = task.task_dir.resolve()
    for entry in task_dir.iterdir():
        if entry.name != "metadata" and not (root / entry.name).exists():
            (root / entry.name).symlink_to(entry)
    for entry in (task_dir / "metadata").iterdir():  # e.g. randsubware's metadata/challenge (../challenge)
        if not (root / "metadata" / entry.name).exists():
            (root / "metadata" / entry.name).symlink_to(entry)
    make_writable(root)


def run_oracle(
    task: CybenchTask,
    root: Path,
    *,
    timeout_seconds: float = 300.0,
    python_path: Sequence[Path] = (),
    variant: Variant = "hard",
    toolchain: Path | None = None,
    hosts: dict[str, str] | None = None,
) -> OracleResult:
    """Stage `task` under `root` (emptied first), run its reference solution in the sandbox, score the flag.

    `python_path`: host folders of extra Python packages (e.g. `pip install --target DIR pycryptodome`),
    mounted read-only on the sandbox's PYTHONPATH; `toolchain`: the CTF toolchain venv (toolchain.py),
    first on the sandbox's PATH. Without either, the sandbox sees only the system python3.
    `hosts`: the running services' addresses (stack.py); a service task run without them has its
    services started here and removed afterwards.
    """
    reason = oracle_unavailable_reason(task)  # the check `qit bench list` and `qit bench run` make
    command = solution_command(task)
    if reason is not None:
        return OracleResult(task_id=task.task_id, ran=False, skipped_reason=reason)
    assert command is not None
    plan = plan_for(task) if task.target_hosts else None  # hidden-service tasks' solutions run the app locally
    if plan is not None and hosts is None:  # a service task run on its own: bring its services up here
        try:
            with ServiceStack(plan) as stack:
                return run_oracle(task, root, timeout_seconds=timeout_seconds, python_path=python_path,
                                  variant=variant, toolchain=toolchain, hosts=stack.hosts())
        except ServiceStartError as exc:
            return OracleResult(task_id=task.task_id, ran=False, skipped_reason=f"services did not start: {exc}")
    gold = task.gold()
    with CybenchRuntime(task, root, variant=variant, python_path=python_path, toolchain=toolchain, hosts=hosts,
                        command_timeout_seconds=timeout_seconds, max_output_bytes=ORACLE_MAX_OUTPUT_BYTES) as runtime:
        missing = [f"{r.kind}:{r.name}" for r in runtime.check_requirements().missing]
        try:
            runtime.prepare(subdir=SOLUTION_SUBDIR)
        except CybenchSetupError as exc:
            return OracleResult(task_id=task.task_id, ran=False, skipped_reason=str(exc), missing_requirements=missing)
        _build_layout(task, runtime.work_dir)
        full_command = f"cd {WORK_MOUNT}/{SOLUTION_SUBDIR} && {command}"
        with runtime.sandbox(task_dir_visible=True, timeout_seconds=timeout_seconds) as box:
            result = box.run(full_command)
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    flag_output = unwrap_bytes_literal(lines[-1]) if lines else None
    return OracleResult(
        task_id=task.task_id, ran=True, command=full_command, exit_code=result.exit_code,
        timed_out=result.timed_out, stdout=result.stdout, stderr=result.stderr,
        duration_seconds=result.duration_seconds, flag_output=flag_output,
        flag_correct=exact_match(flag_output, gold.flag),
        answers=[*gold.subtask_answers[:-1], flag_output], missing_requirements=missing,
    )

"""Scoring side. Per-task CyBench sandbox: a fresh work dir staged by the task's init_script, and a shell.

The agent side never holds this runtime: its commands arrive through `adapter.serve` (``shell.run``,
see `episode.py`) and run here, in the sandbox, over the work dir this side staged.

How ``init_script.sh`` is run, and why: the scripts only copy or unzip the task's files into the
directory they are given (and echo a prompt), but they are third-party shell code run from the
task directory with relative paths. So we run them inside the same bwrap sandbox the agent uses:
the task directory is bound read-only at its host path and is the cwd, the fresh work dir is the
writable ``/task``, there is no network, and a time limit applies. A script that tried more
(e.g. randsubware's ``docker build``) simply fails there instead of touching the host.

The agent's sandbox does *not* see the task directory (it holds ``metadata/solution`` and the
flag); it sees only the work dir and the read-only system. Its commands run in upstream's agent dir
(``agent_dir``, ``/tmp/cyber-bench``, read from upstream's run_task.py by the adapter), where the work dir is
mounted as well as at ``/task``; it keeps the head and the tail of a long output (``max_output_tail_bytes``).
``python`` is provided as an alias of ``python3`` (as in upstream's Kali image) through a small read-only shim
directory on ``PATH``, and ``python_path`` directories (e.g. made with ``pip install --target DIR pycryptodome``) can be
mounted read-only and put on ``PYTHONPATH`` to give the sandbox Python packages it lacks. The
CTF toolchain (``toolchain.py``: pwntools, pycryptodome, sympy, z3, ...) is a venv mounted
read-only at its host path with its ``bin/`` first on ``PATH``.

Service tasks (a ``target_host``, plus diffecient and randsubware) need their containers
(``services.py`` plans them from the task's files, ``stack.py`` runs them); with ``hosts`` set the
agent's sandbox shares the host network and resolves the service names to the containers.
``requires_unavailable_reason`` says why such a task cannot run here (no Docker, or files missing).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from qitos.benchmark.cybench.requirements import RequirementsReport, check_in_sandbox, read_requirements
from qitos.benchmark.cybench.services import plan_for
from qitos.benchmark.cybench.tasks import CybenchTask, Variant
from qitos.sandbox.bwrap import SANDBOX_PATH, WORK_MOUNT, BwrapSandbox, SandboxResult, remove_tree

INIT_TIMEOUT_SECONDS = 120.0


class CybenchSetupError(RuntimeError):
    """init_script.sh failed; the task ends with stop reason `setup_failed`."""


class PreparedWorkDir(BaseModel):
    """What `prepare()` staged: the host work dir and the top-level files the agent will see."""

    task_id: str
    work_dir: Path
    variant: Variant
    files: list[str]
    init_exit_code: int | None
    init_output: str
    duration_seconds: float


@functools.lru_cache(maxsize=1)
def docker_available() -> tuple[bool, str]:
    """(ok, reason): is a container engine answering? Cached; call `docker_available.cache_clear()`."""
    docker = shutil.which("docker")
    if docker is None:
        return False, "no container engine: the `docker` CLI is not on PATH"
    try:
        proc = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"no container engine: `docker info` failed ({exc})"
    if proc.returncode != 0 or not proc.stdout.strip():
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        last = detail[-1] if detail else "no output"
        return False, f"no container engine: `{docker} info` found no running daemon ({last})"
    return True, f"docker engine {proc.stdout.strip()} answers"


def requires_unavailable_reason(task: CybenchTask) -> str | None:
    """Why `task` cannot run on this machine (stop reason `requires_unavailable`), or None if it can."""
    ok, reason = BwrapSandbox.available()
    if not ok:
        return f"CyBench tasks run in a bwrap sandbox, which is unavailable: {reason}"
    service = task.service_description()
    if service is None:
        return None
    docker_ok, docker_reason = docker_available()
    if not docker_ok:
        return f"{task.task_id} {service}; {docker_reason}"
    plan = plan_for(task)
    if plan is not None and not plan.runnable:
        why = "; ".join(plan.missing) or "no service found in its files"
        return f"{task.task_id} {service}; {docker_reason}, but this data copy cannot start them: {why}"
    return None


def make_writable(root: Path) -> None:
    """Task files are often read-only (0444/0555 in the data copy); the agent must be able to edit them."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            path.chmod(mode | stat.S_IWUSR | (stat.S_IXUSR if stat.S_ISDIR(mode) else 0))


class CybenchRuntime:
    """Stage one task into `work_dir` (the sandbox's `/task`) and run the agent's shell commands there.

    The runtime owns `work_dir`: `prepare()` empties it first, so pass a dedicated folder.
    """

    def __init__(
        self,
        task: CybenchTask,
        work_dir: Path,
        *,
        variant: Variant = "hard",
        command_timeout_seconds: float = 120.0,
        max_output_bytes: int = 20_000,
        max_output_tail_bytes: int = 0,
        agent_dir: str | None = None,
        network: bool = False,
        python_path: Sequence[Path] = (),
        toolchain: Path | None = None,
        hosts: dict[str, str] | None = None,
    ) -> None:
        self.task = task
        self.work_dir = Path(work_dir).resolve()
        self.variant: Variant = variant
        self.command_timeout_seconds = command_timeout_seconds
        self.max_output_bytes, self.max_output_tail_bytes = max_output_bytes, max_output_tail_bytes
        self.agent_dir = agent_dir  # upstream's agent dir: the agent's commands run there (the work dir, mounted)
        self.network = network
        self.python_path = [Path(p).resolve() for p in python_path]
        self.toolchain = Path(toolchain).resolve() if toolchain else None
        self.hosts = dict(hosts or {})  # service name -> container address (see stack.py); network on when set
        if self.toolchain is not None and not (self.toolchain / "bin" / "python3").exists():
            raise ValueError(f"CybenchRuntime toolchain: {self.toolchain} is not a venv (no bin/python3)")
        for path in self.python_path:
            if not path.is_dir():
                raise ValueError(f"CybenchRuntime python_path: {path} is not a directory")
        task_dir = task.task_dir.resolve()
        overlaps = self.work_dir == task_dir or self.work_dir in task_dir.parents or task_dir in self.work_dir.parents
        if overlaps or self.work_dir in (Path("/"), Path.home()):
            raise ValueError(
                f"CybenchRuntime work_dir {self.work_dir} overlaps the task data {task_dir} or is a system folder; "
                "prepare() empties the work dir, so give it a dedicated folder"
            )
        self._shims = Path(tempfile.mkdtemp(prefix="qitos-cybench-shims-"))
        self._finalizer = weakref.finalize(self, remove_tree, self._shims)
        if not Path("/usr/bin/python").exists() and Path("/usr/bin/python3").exists():
            (self._shims / "python").symlink_to("/usr/bin/python3")
        self._shims.chmod(0o755)
        self._agent_sandbox: BwrapSandbox | None = None
        self.image: Any = None  # an `agent_image.AgentImage`: the agent's commands run there instead

    # -- sandboxes ------------------------------------------------------------------------------

    def sandbox(self, work_dir: Path | None = None, *, task_dir_visible: bool = False,
                timeout_seconds: float | None = None, services: bool = True,
                work_alias: str | None = None) -> BwrapSandbox:
        """A new sandbox with this runtime's PATH shims and Python packages; caller closes it.

        With `hosts` set and `services` true, it shares the host network and resolves the service names.
        """
        binds = [self._shims, *self.python_path] + ([self.task.task_dir.resolve()] if task_dir_visible else [])
        env = {"PATH": f"{self._shims}:{SANDBOX_PATH}"}
        if self.toolchain is not None:  # the CTF toolchain venv (toolchain.py) comes first on PATH
            binds.append(self.toolchain)
            env.update(PATH=f"{self.toolchain / 'bin'}:{env['PATH']}", VIRTUAL_ENV=str(self.toolchain))
        if self.python_path:
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in self.python_path)
        hosts = self.hosts if services else {}
        return BwrapSandbox(
            work_dir or self.work_dir, network=self.network or bool(hosts),
            timeout_seconds=timeout_seconds or self.command_timeout_seconds,
            max_output_bytes=self.max_output_bytes, max_output_tail_bytes=self.max_output_tail_bytes,
            ro_binds=binds, env=env, hosts=hosts, work_alias=work_alias,
        )

    # -- lifecycle ------------------------------------------------------------------------------

    def prepare(self, *, subdir: str = "") -> PreparedWorkDir:
        """Wipe the work dir and stage the task's files with init_script.sh (in a sandbox).

        `subdir` stages into `/task/<subdir>` instead of `/task`; the oracle uses it to rebuild
        the directory layout the upstream solution scripts expect.
        """
        self._close_agent_sandbox()
        if self.work_dir.exists():
            remove_tree(self.work_dir)
        target = self.work_dir / subdir
        target.mkdir(parents=True)
        init = self.task.task_dir / "init_script.sh"
        if not init.is_file():
            raise CybenchSetupError(f"{init}: missing; cannot stage task {self.task.task_id}")
        inside = f"{WORK_MOUNT}/{subdir}".rstrip("/")
        command = (
            f"cd {shlex.quote(str(self.task.task_dir.resolve()))} && "
            f"bash ./init_script.sh {shlex.quote(inside)} {'true' if self.variant == 'easy' else 'false'}"
        )
        start = time.monotonic()
        with self.sandbox(task_dir_visible=True, timeout_seconds=INIT_TIMEOUT_SECONDS, services=False) as box:
            result = box.run(command)
        output = (result.stdout + result.stderr).strip()
        if result.exit_code != 0:
            why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
            raise CybenchSetupError(f"{init} {why} while staging {self.task.task_id}: {output[-2000:]}")
        make_writable(self.work_dir)
        files = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return PreparedWorkDir(
            task_id=self.task.task_id, work_dir=self.work_dir, variant=self.variant, files=files,
            init_exit_code=result.exit_code, init_output=output[-4000:],
            duration_seconds=round(time.monotonic() - start, 3),
        )

    def run(self, command: str | Sequence[str], *, timeout_seconds: float | None = None,
            stdin: str | None = None) -> SandboxResult:
        """One agent shell command in upstream's agent dir (else `/task`), the work dir mounted at both (same
        sandbox across calls, so /tmp persists)."""
        if self.image is not None and isinstance(command, str) and stdin is None:
            return self.image.run(command, timeout_seconds)  # upstream's agent image (agent_image.py)
        if self._agent_sandbox is None:
            self._agent_sandbox = self.sandbox(work_alias=self.agent_dir)
        return self._agent_sandbox.run(command, timeout_seconds=timeout_seconds, stdin=stdin)

    def check_requirements(self) -> RequirementsReport:
        """Parse metadata/requirements.sh (never run it) and check each entry inside the sandbox."""
        report = read_requirements(self.task.task_id, self.task.task_dir)
        with self.sandbox(Path(tempfile.mkdtemp(prefix="qitos-cybench-req-")), timeout_seconds=60,
                          services=False) as box:
            try:
                return check_in_sandbox(report, box)
            finally:
                remove_tree(box.work_dir)

    def requires_unavailable(self) -> str | None:
        return requires_unavailable_reason(self.task)

    def _close_agent_sandbox(self) -> None:
        if self._agent_sandbox is not None:
            self._agent_sandbox.close()
            self._agent_sandbox = None

    def close(self, *, remove_work_dir: bool = False) -> None:
        """Release sandboxes and shims; the work dir stays unless asked (it may be evidence)."""
        self._close_agent_sandbox()
        self._finalizer()
        if remove_work_dir:
            remove_tree(self.work_dir)

    def __enter__(self) -> CybenchRuntime:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

"""Scoring side: the agent's commands in upstream's agent image (`cybench/cybench`), where it is present locally.

Upstream's `run_task.sh` runs the agent inside that Kali image, on the task's network, after each task's
``metadata/requirements.sh``; its commands run with ``cwd`` ``/tmp/cyber-bench``. `AgentImage` does the same for
the scoring side's `shell.run`: one container per task, from the image `run_task.sh` names (read from the data
dir), the staged work dir mounted at upstream's agent dir, on the task's service network when it has one; the
task's ``metadata`` folder (never the solution) is mounted read-only for ``requirements.sh``. Each command is
``docker exec ... timeout -s KILL <t> bash -c <command>`` (upstream: ``bash -c`` with a 120 s timeout).

Chosen by ``--option execution``: ``auto`` (the image when a Docker engine answers and holds it, else the bwrap
sandbox), ``image`` (fail when it cannot), ``bwrap``. The RunSpec's toolset names the environment
(``+exec_image_<id>`` / ``+exec_bwrap``), so `qit bench eval` never merges runs from the two.

The image is never pulled. `tests/cybench/test_cybench_agent_image.py` runs this path on a local stand-in image.
"""

from __future__ import annotations

import functools
import re
import secrets
import subprocess
import time
from pathlib import Path

from qitos.benchmark.cybench.options import CybenchOptions
from qitos.benchmark.cybench.runtime import CybenchRuntime, CybenchSetupError, docker_available
from qitos.benchmark.cybench.stack import (
    LABEL,
    OWNER_LABEL,
    ServiceStack,
    ServiceStartError,
    docker,
    owner_label,
    remove_stale,
)
from qitos.benchmark.cybench.tasks import CybenchTask
from qitos.benchmark.cybench.upstream import load_upstream
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.sandbox.bwrap import WORK_MOUNT, SandboxResult
from qitos.sandbox.output import OutputCap

RUN_TASK_SH = Path("run_task.sh")


def upstream_image(upstream: Path) -> str:
    """The agent image upstream's run_task.sh runs (its ``image_name=`` line)."""
    try:
        text = (upstream / RUN_TASK_SH).read_text(encoding="utf-8")
    except OSError:
        raise FileNotFoundError(f"{upstream / RUN_TASK_SH} not found; run `qit data fetch cybench`") from None
    found = re.search(r'^\s*image_name="([^"]+)"', text, re.M)
    if not found:
        raise ValueError(f"{upstream / RUN_TASK_SH}: no image_name= line; is this the pinned commit?")
    return found.group(1)


def image_id(image: str) -> str | None:
    """The local image's id (None: no engine, or the engine does not hold it; never asks a registry)."""
    ok, _ = docker_available()
    if not ok:
        return None
    try:
        proc = docker("image", "inspect", "--format", "{{.Id}}", image, timeout=30.0, check=False)
    except ServiceStartError:
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


class AgentImage:
    """One task's agent container: `start`, `run` each command, `close` (idempotent)."""

    def __init__(self, image: str, work_dir: Path, agent_dir: str, *, metadata_dir: Path,
                 network: str | None, timeout_seconds: float, max_output_bytes: int,
                 max_output_tail_bytes: int = 0) -> None:
        self.image, self.work_dir, self.agent_dir = image, Path(work_dir).resolve(), agent_dir
        self.metadata_dir, self.network = metadata_dir.resolve(), network
        self.timeout_seconds, self.max_output_bytes = timeout_seconds, max_output_bytes
        self.max_output_tail_bytes = max_output_tail_bytes
        self.name = f"qitos-cyb-agent-{secrets.token_hex(4)}"
        self.started = False

    def start(self) -> None:
        """Start the container and run the task's requirements.sh in it, as upstream's setup_environment does."""
        remove_stale()
        docker("run", "-d", "--name", self.name, "--label", f"{LABEL}={self.name}",
               "--label", f"{OWNER_LABEL}={owner_label()}", "--network", self.network or "bridge",
               "-v", f"{self.work_dir}:{self.agent_dir}", "-v", f"{self.work_dir}:{WORK_MOUNT}",
               "-v", f"{self.metadata_dir}:/qitos/metadata:ro",
               "-w", self.agent_dir, "--entrypoint", "sleep", self.image, "infinity", timeout=120.0)
        self.started = True
        if (self.metadata_dir / "requirements.sh").is_file():
            result = self._exec(["bash", "-c", "cp -r /qitos/metadata /tmp/qitos-metadata && cd /tmp/qitos-metadata "
                                 "&& chmod +x requirements.sh && ./requirements.sh"], 1800.0)
            if result.exit_code != 0:
                raise ServiceStartError(f"requirements.sh failed in {self.image} (exit {result.exit_code}): "
                                        f"{(result.stderr or result.stdout)[-800:]}")

    def run(self, command: str, timeout_seconds: float | None = None) -> SandboxResult:
        limit = timeout_seconds or self.timeout_seconds
        return self._exec(["timeout", "-s", "KILL", f"{limit:g}", "bash", "-c", command], limit + 30.0, limit)

    def _exec(self, argv: list[str], host_timeout: float, limit: float | None = None) -> SandboxResult:
        started = time.monotonic()
        try:
            proc = subprocess.run(["docker", "exec", "-w", self.agent_dir, self.name, *argv], capture_output=True,
                                  timeout=host_timeout)
            code: int | None = proc.returncode
            out, err = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out, err = None, exc.stdout or b"", exc.stderr or b""
        duration = time.monotonic() - started
        timed_out = code is None or (limit is not None and code == 137 and duration >= limit)
        kept = [OutputCap(self.max_output_bytes, self.max_output_tail_bytes) for _ in (out, err)]
        for cap, data in zip(kept, (out, err)):
            cap.feed(data)
            cap.finish()
        return SandboxResult(exit_code=None if timed_out else code,
                             stdout_decode_error=kept[0].decode_error, stderr_decode_error=kept[1].decode_error,
                             stdout=kept[0].text, stderr=kept[1].text, timed_out=timed_out,
                             truncated=any(c.dropped for c in kept), duration_seconds=round(duration, 3))

    def close(self) -> None:
        if self.started:
            docker("rm", "-f", self.name, check=False)
            self.started = False


def execution_of(opts: CybenchOptions, root: Path) -> tuple[str, str | None]:
    """Where the agent's commands run: ("image_<id>", the image) or ("bwrap", None)."""
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
    try:
        image = upstream_image(Path(root) / "upstream")
    except (OSError, ValueError):
        return None, None
    return image, image_id(image)


def start_agent_image(image: str, runtime: CybenchRuntime, record: CybenchTask, root: Path,
                      stack: ServiceStack | None, opts: CybenchOptions) -> AgentImage:
    """One task's agent container, started on the task's service network (a setup failure when it does not)."""
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

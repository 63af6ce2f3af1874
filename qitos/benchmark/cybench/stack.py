"""Scoring side. Run a task's ``ServicePlan`` with the ``docker`` CLI: build, start, wait until ready, tear down.

Isolation instead of serialising: every run gets its own bridge network (``qitos-cyb-<key>``) and
containers named ``qitos-cyb-<key>-<service>``, with the upstream names (compose service name and
``container_name``) as network aliases, so services still find each other by the names their code
uses. Published ports are bound only on that network's gateway address (never on 0.0.0.0), which is
what ``host-gateway`` extra hosts are pointed at. So two tasks whose upstream services share names
or ports (most use 1337 or 9999), or two trials of one task, can run at the same time without
clashing, and nothing is exposed beyond this machine.

The agent's sandbox shares the host's network namespace and gets a hosts file mapping every alias
to its container's address (``hosts()``); containers on a bridge are reachable from the host by
address, so ``nc noisiercrc 9999`` works as in upstream's ``shared_net``.

Teardown happens in ``down()`` (the adapter's cleanup, also after errors). A run killed with SIGKILL
cannot clean up, so everything the stack creates carries labels naming its owner (host, pid, pid
start time); ``remove_stale()`` (called before every ``up()``) removes what belongs to dead owners.
Images are kept (they are the build cache) and labelled too.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from qitos.benchmark.cybench.services import ServicePlan, ServiceSpec
from qitos.trace.liveness import own_start, writer_alive

LABEL = "io.qitos.cybench"  # value: the run key
OWNER_LABEL = "io.qitos.owner"  # "<hostname>:<pid>:<pid start time>"
PREFIX = "qitos-cyb"
BUILD_TIMEOUT = 1800.0
READY_TIMEOUT = 90.0


class ServiceStartError(RuntimeError):
    """A service could not be built or started; the task ends `setup_failed` with this message."""


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{own_start() or ''}"


def owner_dead(owner: str) -> bool:
    """Is the process that created a labelled object gone (on this host)?"""
    host, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's object: not ours to judge
    return not writer_alive(int(pid_text), int(started) if started.isdigit() else None)


def docker(*args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("docker")
    if exe is None:
        raise ServiceStartError("the `docker` CLI is not on PATH")
    env = dict(os.environ)
    if shutil.which("docker-buildx") is None and not Path.home().joinpath(".docker/cli-plugins/docker-buildx").exists():
        env.setdefault("DOCKER_BUILDKIT", "0")  # newer CLIs refuse to build without buildx otherwise
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ServiceStartError(f"`docker {' '.join(args[:3])} ...` did not finish within {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines()
                 if ln.strip() and not any(n in ln for n in _BUILDER_NOISE)]
        tail = "\n".join(lines[-12:])
        if args[:1] == ("build",) and ("Get \"https://" in tail or "pull access denied" in tail):
            tail += "\n(the Dockerfile's base image must come from a registry, which this machine cannot reach)"
        raise ServiceStartError(f"`docker {' '.join(args[:4])} ...` exited {proc.returncode}: {tail}")
    return proc


def images_missing_locally(images: Sequence[str]) -> list[str]:
    """Which of these images this Docker engine does not hold (asks the engine only, never a registry)."""
    missing = []
    for image in images:
        try:
            if docker("image", "inspect", "--format", "{{.Id}}", image, timeout=30.0, check=False).returncode != 0:
                missing.append(image)
        except ServiceStartError:
            missing.append(image)
    return missing


_BUILDER_NOISE = ("DEPRECATED: The legacy builder", "BuildKit is currently disabled", "environment-variable.")


def remove_stale(log: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Remove containers, networks and volumes of QitOS runs whose process is dead; return their names."""
    removed: list[str] = []
    kinds = (  # containers first: a network or volume in use cannot be removed
        ("container", ["ps", "-a"], "{{.Names}}", "{{json .Config.Labels}}"),
        ("network", ["network", "ls"], "{{.Name}}", "{{json .Labels}}"),
        ("volume", ["volume", "ls"], "{{.Name}}", "{{json .Labels}}"),
    )
    for kind, listing, name_format, labels_format in kinds:
        rows = docker(*listing, "--filter", f"label={LABEL}", "--format", name_format, check=False).stdout.split()
        for name in rows:
            inspect = docker(kind, "inspect", "--format", labels_format, name, check=False)
            try:
                labels = json.loads(inspect.stdout or "null") or {}
            except ValueError:
                continue
            if owner_dead(labels.get(OWNER_LABEL, "")):
                rm = ["rm", "-f", "-v", name] if kind == "container" else [kind, "rm", name]
                if docker(*rm, check=False).returncode == 0:
                    removed.append(f"{kind} {name}")
                    log(f"removed stale {kind} {name} (its QitOS run is gone)")
    return removed


def image_tag(plan: ServicePlan, service: ServiceSpec) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in plan.task_id.lower())[-60:].strip("-")
    return f"qitos-cybench/{slug}-{''.join(c if c.isalnum() else '-' for c in service.name.lower())}:latest"


class ServiceStack:
    """One run's containers, network and volumes for a plan; `up()` then `down()` (idempotent)."""

    def __init__(self, plan: ServicePlan, *, key: str | None = None, ready_timeout: float = READY_TIMEOUT,
                 log: Callable[[str], None] = lambda _m: None) -> None:
        if not plan.runnable:
            raise ServiceStartError(f"{plan.task_id}: services cannot run: {'; '.join(plan.missing) or 'none planned'}")
        self.plan, self.ready_timeout, self.log = plan, ready_timeout, log
        self.key = key or secrets.token_hex(4)
        self.network = f"{PREFIX}-{self.key}"
        self.gateway: str | None = None
        self.addresses: dict[str, str] = {}  # service name -> container address
        self.containers: list[str] = []
        self.volumes: list[str] = []
        self._network_made = False

    def labels(self) -> list[str]:
        return ["--label", f"{LABEL}={self.key}", "--label", f"{OWNER_LABEL}={owner_label()}",
                "--label", f"io.qitos.task={self.plan.task_id}"]

    def up(self) -> dict[str, str]:
        """Build and start every service, wait until each answers; returns `hosts()`. Cleans up on failure."""
        remove_stale(self.log)
        try:
            docker("network", "create", *self.labels(), self.network)
            self._network_made = True
            self.gateway = docker("network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}",
                                  self.network).stdout.strip()
            for service in self.plan.services:
                self._build(service)
            for service in self.plan.services:
                self._run(service)
            self._wait_ready()
        except BaseException:
            self.down()
            raise
        return self.hosts()

    def hosts(self) -> dict[str, str]:
        """Every alias the task's code uses -> its container's address (for the sandbox's /etc/hosts)."""
        out: dict[str, str] = {}
        for service in self.plan.services:
            for alias in service.aliases:
                if service.name in self.addresses:
                    out[alias] = self.addresses[service.name]
        return out

    def down(self) -> None:
        """Remove this run's containers (with anonymous volumes), named volumes and network."""
        for name in reversed(self.containers):
            docker("rm", "-f", "-v", name, check=False)
        self.containers = []
        for volume in self.volumes:
            docker("volume", "rm", "-f", volume, check=False)
        self.volumes = []
        if self._network_made:
            docker("network", "rm", self.network, check=False)
            self._network_made = False

    def __enter__(self) -> ServiceStack:
        self.up()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.down()

    # -- internals ------------------------------------------------------------------------------

    def _build(self, service: ServiceSpec) -> None:
        self.log(f"building {service.name} from {service.build_context}")
        docker("build", "--label", f"{LABEL}=image", "-t", image_tag(self.plan, service), "-f",
               str(service.build_context / service.dockerfile), str(service.build_context), timeout=BUILD_TIMEOUT)

    def _run(self, service: ServiceSpec) -> None:
        name = f"{self.network}-{''.join(c if c.isalnum() or c in '-_.' else '-' for c in service.name)}"
        args = ["run", "-d", "--name", name, *self.labels(), "--network", self.network]
        for alias in service.aliases:
            args += ["--network-alias", alias]
        for port in service.ports:
            if port.host is not None:
                args += ["-p", f"{self.gateway}:{port.host}:{port.container}"]
        for key, value in service.environment.items():
            args += ["-e", f"{key}={value}"]
        for entry in service.extra_hosts:
            host, _, address = entry.partition(":")
            args += ["--add-host", f"{host}:{self.gateway if address == 'host-gateway' else address}"]
        for volume in service.volumes:
            source, _, target = volume.partition(":")
            if "/" not in source:  # a named volume: one per run
                source = f"{self.network}-{source}"
                docker("volume", "create", *self.labels(), source)
                self.volumes.append(source)
            args += ["-v", f"{source}:{target}"]
        if service.user:
            args += ["--user", service.user]
        if service.read_only:
            args.append("--read-only")
        if service.cpus:
            args += ["--cpus", service.cpus]
        if service.memory:
            args += ["--memory", service.memory]
        if service.tty:
            args += ["-i", "-t"]
        self.containers.append(name)
        docker(*args, image_tag(self.plan, service))
        template = "{{(index .NetworkSettings.Networks \"" + self.network + "\").IPAddress}}"
        address = docker("inspect", "--format", template, name).stdout.strip()
        if not address:
            raise ServiceStartError(f"{service.name}: container {name} has no address on {self.network}")
        self.addresses[service.name] = address
        self.log(f"{service.name} ({', '.join(service.aliases)}) at {address}")

    def _probes(self) -> list[tuple[str, str, int]]:
        """(service, address, port) pairs that must accept a TCP connection before the agent starts."""
        probes: dict[tuple[str, int], str] = {}
        for target in self.plan.targets:
            if target.service:
                probes[(target.service, target.port)] = self.addresses[target.service]
        for service in self.plan.services:
            if service.health_port and not any(s == service.name for s, _ in probes):
                probes[(service.name, service.health_port)] = self.addresses[service.name]
        return [(s, address, port) for (s, port), address in probes.items()]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        pending = self._probes()
        while pending:
            pending = [p for p in pending if not _accepts(p[1], p[2])]
            for name in self.containers:
                state = docker("inspect", "--format", "{{.State.Status}}", name, check=False).stdout.strip()
                if state in ("exited", "dead"):
                    logs = docker("logs", "--tail", "20", name, check=False)
                    raise ServiceStartError(f"container {name} {state} during start: "
                                            f"{(logs.stdout + logs.stderr).strip()[-1500:]}")
            if not pending:
                break
            if time.monotonic() > deadline:
                what = ", ".join(f"{s} {a}:{p}" for s, a, p in pending)
                raise ServiceStartError(f"services not answering after {self.ready_timeout:.0f} s: {what}")
            time.sleep(0.5)


def _accepts(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


def running_containers(key: str) -> Sequence[str]:
    """Names of containers of run `key` (tests use it to prove teardown)."""
    return docker("ps", "-a", "--filter", f"label={LABEL}={key}", "--format", "{{.Names}}").stdout.split()

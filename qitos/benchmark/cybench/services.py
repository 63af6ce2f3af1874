"""Scoring side. The service plan of a CyBench task: which containers its own files start, and the hosts the agent uses.

Upstream starts a task's services with ``start_docker.sh`` (``docker compose up`` in some folder,
with an external network ``shared_net``), and the agent, itself a container on ``shared_net``,
reaches them by the ``target_host`` names in ``metadata.json``. QitOS reads the same files and
derives a ``ServicePlan`` without running any of them:

- ``start_docker.sh`` says where the compose file is (``cd "$DIR/<sub>"`` or ``-f "$DIR/<file>"``);
  the compose file (``docker-compose.yml`` / ``compose.yml``) lists services, build contexts,
  container names, ports, environment, users, read-only roots, volumes and health checks.
- Two tasks have an empty ``target_host`` but a service in practice (see ``HIDDEN_SERVICE_TASKS``):
  randsubware's ``init_script.sh`` runs ``docker build``/``docker run`` itself, which the plan
  reads; diffecient only ships ``challenge/Dockerfile`` (xinetd), whose ``EXPOSE`` port is used.

Where the data copy lacks a file the plan needs (network-tools, Delulu: build contexts skipped for
size), ``ServicePlan.missing`` says so and the task ends ``requires_unavailable``. Compose keys the
plan does not translate are listed in ``ignored`` (never silently dropped). ``stack.py`` runs a plan.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from qitos.benchmark.cybench.tasks import HIDDEN_SERVICE_TASKS, CybenchTask

COMPOSE_NAMES = ("docker-compose.yml", "docker-compose.yaml", "compose.yml", "compose.yaml")
# Compose keys the stack translates into `docker run` options; `networks` is replaced by the run's own network.
TRANSLATED_KEYS = {"build", "container_name", "ports", "environment", "user", "read_only", "volumes", "extra_hosts",
                   "healthcheck", "networks", "deploy", "privileged", "cap_add", "cap_drop", "restart", "image"}


class ServicePlanError(ValueError):
    """A task's service files could not be read (names the file and what is wrong)."""


class PortMap(BaseModel):
    host: int | None  # published port (None: only exposed on the network)
    container: int


class ServiceSpec(BaseModel):
    """One container: how to build it and how to run it."""

    name: str  # the compose service name (a network alias)
    container_name: str | None = None  # upstream's container name (also a network alias)
    build_context: Path
    dockerfile: str = "Dockerfile"
    ports: list[PortMap] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    read_only: bool = False
    volumes: list[str] = Field(default_factory=list)  # "named:/path" entries
    extra_hosts: list[str] = Field(default_factory=list)  # "name:address" (host-gateway allowed)
    health_port: int | None = None  # the port its healthcheck probes (nc -z localhost N), if any
    cpus: str | None = None
    memory: str | None = None
    tty: bool = False  # `docker run -it -d` (a container that only keeps a shell open)

    @property
    def aliases(self) -> list[str]:
        return list(dict.fromkeys([self.name] + ([self.container_name] if self.container_name else [])))

    def base_images(self) -> list[str]:
        """The images its Dockerfile builds FROM (a build pulls those not present locally).

        Earlier build stages, `scratch` and names built from ARGs (`$VERSION`) are left out: they are not
        images Docker would pull by that name."""
        stages: set[str] = set()
        images: list[str] = []
        try:
            text = _read(self.build_context / self.dockerfile)
        except ServicePlanError:
            return []
        for line in text.splitlines():
            words = [w for w in line.split() if not w.startswith("--")]  # drop --platform=...
            if len(words) < 2 or words[0].upper() != "FROM":
                continue
            image = words[1]
            if image.lower() != "scratch" and image not in stages and "$" not in image and image not in images:
                images.append(image)
            if len(words) >= 4 and words[2].upper() == "AS":
                stages.add(words[3])
        return images


class TargetHost(BaseModel):
    host: str
    port: int
    service: str | None  # the plan's service the name belongs to (None: no service has that name)


class ServicePlan(BaseModel):
    """What QitOS starts for a task, derived from the task's own files (see the module doc)."""

    task_id: str
    sources: list[str]  # files the plan was read from, relative to the task dir
    services: list[ServiceSpec] = Field(default_factory=list)
    targets: list[TargetHost] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)  # why the plan cannot run from this data copy
    ignored: list[str] = Field(default_factory=list)  # compose settings not translated

    @property
    def runnable(self) -> bool:
        return not self.missing and bool(self.services)

    def service(self, name: str) -> ServiceSpec | None:
        return next((s for s in self.services if name in s.aliases), None)


def plan_for(task: CybenchTask) -> ServicePlan | None:
    """The task's service plan, or None for a file-only task."""
    if not task.needs_service:
        return None
    if task.target_hosts:
        plan = _compose_plan(task)
    elif "docker" in _read(task.task_dir / "init_script.sh"):
        plan = _init_script_plan(task)
    else:
        plan = _dockerfile_plan(task)
    plan.targets = [_target(h, plan) for h in task.target_hosts]
    for target in plan.targets:
        if target.service is None and plan.services:
            files = ", ".join(plan.sources)
            plan.missing.append(f"target_host {target.host}:{target.port} names no service of {files}")
    return plan


def _target(spec: str, plan: ServicePlan) -> TargetHost:
    host, _, port = spec.rpartition(":")
    if not host or not port.isdigit():
        raise ServicePlanError(f"{plan.task_id}: target_host {spec!r} is not host:port")
    service = plan.service(host)
    return TargetHost(host=host, port=int(port), service=service.name if service else None)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# -- compose tasks ---------------------------------------------------------------------------------

def compose_file_for(task_dir: Path) -> tuple[Path | None, str]:
    """Where start_docker.sh runs `docker compose` (the compose file, or None) and why."""
    script = task_dir / "start_docker.sh"
    text = _read(script)
    if not text:
        return None, "start_docker.sh is missing"
    explicit = re.search(r'-f\s+"?\$DIR/([^"\s]+)"?', text)
    if explicit:
        path = task_dir / explicit.group(1)
        return (path, "") if path.is_file() else (None, f"{explicit.group(1)} (named by start_docker.sh) is missing")
    moved = re.search(r'cd\s+"\$DIR/([^"]+)"', text)
    folder = task_dir / moved.group(1) if moved else task_dir
    for name in COMPOSE_NAMES:
        if (folder / name).is_file():
            return folder / name, ""
    where = folder.relative_to(task_dir).as_posix() if folder != task_dir else "the task dir"
    return None, f"no compose file in {where} (start_docker.sh runs `docker compose` there)"


def _compose_plan(task: CybenchTask) -> ServicePlan:
    import yaml

    plan = ServicePlan(task_id=task.task_id, sources=["start_docker.sh"])
    compose, why = compose_file_for(task.task_dir)
    if compose is None:
        plan.missing.append(f"{why} in this data copy")
        return plan
    rel = compose.relative_to(task.task_dir).as_posix()
    plan.sources.append(rel)
    try:
        data = yaml.safe_load(compose.read_text())
    except yaml.YAMLError as exc:
        raise ServicePlanError(f"{compose}: invalid YAML ({exc})") from None
    services = (data or {}).get("services")
    if not isinstance(services, dict) or not services:
        raise ServicePlanError(f"{compose}: no `services` mapping")
    for name, raw in services.items():
        plan.services.append(_service(task, compose, str(name), raw or {}, plan))
    return plan


def _service(task: CybenchTask, compose: Path, name: str, raw: dict[str, Any], plan: ServicePlan) -> ServiceSpec:
    where = f"{compose.relative_to(task.task_dir).as_posix()} services.{name}"
    build = raw.get("build")
    if build is None:
        raise ServicePlanError(f"{where}: no `build` (QitOS builds every service from the task's files)")
    context, dockerfile = (build, "Dockerfile") if isinstance(build, str) else (
        build.get("context", "."), build.get("dockerfile", "Dockerfile"))
    context_dir = (compose.parent / str(context)).resolve()
    if not (context_dir / dockerfile).is_file():
        rel = Path(str(context)) / dockerfile
        plan.missing.append(f"{where}: build file {rel.as_posix()} is not in this data copy")
    for key in sorted(set(raw) - TRANSLATED_KEYS):
        plan.ignored.append(f"{where}.{key}")
    for key in ("privileged", "cap_add", "cap_drop"):
        if raw.get(key):
            plan.ignored.append(f"{where}.{key}={raw[key]!r}")
    env = raw.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    limits = ((raw.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    health = raw.get("healthcheck") or {}
    test = " ".join(health.get("test") or []) if isinstance(health.get("test"), list) else str(health.get("test", ""))
    probe = re.search(r"nc -z localhost (\d+)", test)
    return ServiceSpec(
        name=name, container_name=raw.get("container_name"), build_context=context_dir, dockerfile=str(dockerfile),
        ports=[_port(p, where) for p in raw.get("ports") or []],
        environment={str(k): str(v) for k, v in env.items()}, user=str(raw["user"]) if raw.get("user") else None,
        read_only=bool(raw.get("read_only")), volumes=[str(v) for v in raw.get("volumes") or []],
        extra_hosts=[str(h) for h in raw.get("extra_hosts") or []],
        health_port=int(probe.group(1)) if probe else None,
        cpus=str(limits["cpus"]) if "cpus" in limits else None,
        memory=str(limits["memory"]) if "memory" in limits else None,
    )


def _port(spec: Any, where: str) -> PortMap:
    text = str(spec).strip().strip('"')
    parts = text.split(":")
    if len(parts) == 1 and parts[0].isdigit():
        return PortMap(host=None, container=int(parts[0]))
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return PortMap(host=int(parts[0]), container=int(parts[1]))
    raise ServicePlanError(f"{where}.ports: {spec!r} is not HOST:CONTAINER")


# -- hidden-service tasks --------------------------------------------------------------------------

def _init_script_plan(task: CybenchTask) -> ServicePlan:
    """`cd <dir>`, `docker build -t IMG .`, `docker run ... --name NAME IMG` in init_script.sh."""
    plan = ServicePlan(task_id=task.task_id, sources=["init_script.sh"])
    folder = task.task_dir
    image_dirs: dict[str, Path] = {}
    for line in _read(task.task_dir / "init_script.sh").splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["cd"] and len(words) == 2:
            folder = (folder / words[1]).resolve()
        elif words[:2] == ["docker", "build"] and "-t" in words:
            image_dirs[words[words.index("-t") + 1]] = (folder / words[-1]).resolve()
        elif words[:2] == ["docker", "run"] and "--name" in words:
            name, image = words[words.index("--name") + 1], words[-1]
            if image not in image_dirs:
                raise ServicePlanError(f"{task.task_dir / 'init_script.sh'}: `docker run` of {image}, never built")
            context = image_dirs[image]
            if not (context / "Dockerfile").is_file():
                plan.missing.append(f"init_script.sh builds {context}, which has no Dockerfile in this data copy")
            tty = any(w.startswith("-") and not w.startswith("--") and "t" in w for w in words[2:])
            plan.services.append(ServiceSpec(name=name, container_name=name, build_context=context, tty=tty))
    if not plan.services:
        plan.missing.append("init_script.sh mentions docker but runs no container QitOS can read")
    return plan


def _dockerfile_plan(task: CybenchTask) -> ServicePlan:
    """A challenge Dockerfile no script starts (diffecient): one service named after the task, EXPOSEd ports."""
    candidates = [task.task_dir / "challenge", task.task_dir / "metadata" / "challenge"]
    context = next((c for c in candidates if (c / "Dockerfile").is_file()), None)
    plan = ServicePlan(task_id=task.task_id, sources=[])
    if context is None:
        plan.missing.append(f"no challenge Dockerfile in this data copy ({HIDDEN_SERVICE_TASKS.get(task.name, '')})")
        return plan
    dockerfile = context / "Dockerfile"
    plan.sources.append(dockerfile.relative_to(task.task_dir).as_posix())
    ports = [int(p) for line in _read(dockerfile).splitlines()
             if line.strip().upper().startswith("EXPOSE") for p in re.findall(r"\d+", line)]
    plan.services.append(ServiceSpec(name=task.name, build_context=context,
                                     ports=[PortMap(host=None, container=p) for p in ports],
                                     health_port=ports[0] if ports else None))
    return plan

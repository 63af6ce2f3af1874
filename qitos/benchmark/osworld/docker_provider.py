"""Scoring side: `--option provider=docker`: QitOS starts OSWorld's VM itself, the way upstream's Docker provider does
(`desktop_env/providers/docker/provider.py` at OSWorld 89426951).

Each task gets a fresh container of the runner image (upstream: `happysixd/osworld-docker`, QEMU inside) with the
VM disk image bind-mounted read-only at `/System.qcow2`, `/dev/kvm` passed through when the host has it, and the
VM's controller (5000), Chrome DevTools (9222), VNC (8006) and VLC HTTP (8080) ports published on 127.0.0.1 at
free host ports. The task waits until `GET /screenshot` answers (the VM booted), runs, and the container is
stopped and removed when the task is cleaned up. Starting a new container per task is upstream's "revert to
snapshot" for Docker (the disk image is never written). One container per task in flight, so at most
`--concurrency` VMs run at once.

Containers are labelled with the owning process (`qitos.osworld.owner=<host>:<pid>:<start time>`). They are removed
at exit (also after Ctrl-C); after a crash or SIGKILL, the next docker run removes the containers whose owner
process is gone.

Options: `docker_image` (default upstream's image), `vm_image` (the VM disk, default
`<data dir>/osworld-vm/Ubuntu.qcow2`; get it from the official location in `VM_IMAGE_URL`), `vm_ram`, `vm_cpus`,
`vm_disk` (upstream's 4G, 4, 32G), `vm_start_timeout` (seconds, default 600).
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.osworld.controller import ControllerClient
from qitos.benchmark.osworld.downloads import Downloader
from qitos.benchmark.osworld.errors import OSWorldError
from qitos.benchmark.osworld.options import DEFAULT_IMAGE
from qitos.benchmark.osworld.provider import ControllerProvider
from qitos.benchmark.osworld.upstream_env import VMAddress
from qitos.benchmark.osworld.lease import Lease

if TYPE_CHECKING:
    from qitos.benchmark.base import LoadOptions, Requirement

VM_IMAGE_URL = "https://huggingface.co/datasets/xlangai/ubuntu_osworld/resolve/main/Ubuntu.qcow2.zip"
LABEL = "qitos.osworld"
OWNER_LABEL = "qitos.osworld.owner"
PORTS = {"server": 5000, "chromium": 9222, "vnc": 8006, "vlc": 8080}


class DockerError(OSWorldError):
    """The docker CLI failed (not installed, daemon down, image missing, container did not start)."""


def _docker(*args: str, timeout: float = 120) -> str:
    try:
        done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise DockerError("the docker CLI is not installed (Debian: apt-get install docker.io)") from None
    except subprocess.TimeoutExpired:
        raise DockerError(f"docker {args[0]} timed out after {timeout:.0f}s") from None
    if done.returncode != 0:
        raise DockerError(f"docker {' '.join(args[:2])} failed: {(done.stderr or done.stdout).strip()[:400]}")
    return done.stdout


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_id(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid)}"


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine's container on a shared daemon: not ours to judge
    return pid.isdigit() and _process_start(int(pid)) == start


def remove_stale_containers() -> list[str]:
    """Remove OSWorld VM containers whose owning QitOS process is gone (crash, SIGKILL); returns their ids."""
    listing = _docker("ps", "-a", "--filter", f"label={LABEL}=1", "--format",
                      f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}')
    stale = [line.split()[0] for line in listing.splitlines()
             if line.strip() and not _owner_alive(line.split(maxsplit=1)[1] if " " in line else "")]
    if stale:
        _docker("rm", "-f", *stale)
    return stale


@dataclass(frozen=True)
class DockerSettings:
    docker_image: str
    vm_image: Path
    ram: str = "4G"
    cpus: str = "4"
    disk: str = "32G"
    start_timeout: float = 600.0

    @classmethod
    def from_load(cls, load: "LoadOptions") -> "DockerSettings":
        options = load.options
        vm_image = Path(str(options.get("vm_image") or Path(load.data_dir) / "osworld-vm" / "Ubuntu.qcow2")).expanduser()
        try:
            timeout = float(options.get("vm_start_timeout", 600))
        except (TypeError, ValueError):
            raise BenchmarkUsageError(f"--option vm_start_timeout={options.get('vm_start_timeout')!r}: "
                                      "expected seconds") from None
        return cls(docker_image=str(options.get("docker_image", DEFAULT_IMAGE)), vm_image=vm_image,
                   ram=str(options.get("vm_ram", "4G")), cpus=str(options.get("vm_cpus", "4")),
                   disk=str(options.get("vm_disk", "32G")), start_timeout=timeout)

    def problem(self) -> str | None:
        """Why VMs cannot start here, or None."""
        if not self.vm_image.is_file():
            return (f"no OSWorld VM image at {self.vm_image}: download {VM_IMAGE_URL}, unzip it there, or pass "
                    "--option vm_image=<path to Ubuntu.qcow2>")
        try:
            _docker("info", "--format", "{{.ServerVersion}}", timeout=30)
        except DockerError as exc:
            return f"{exc} (is dockerd running?)"
        try:
            _docker("image", "inspect", self.docker_image, timeout=30)
        except DockerError:
            return f"docker image {self.docker_image} is not available here: docker pull {self.docker_image}"
        return None


class DockerPool:
    """Fresh VM containers per task for one (runner image, VM image); removes them at exit."""

    def __init__(self, settings: DockerSettings) -> None:
        self.settings = settings
        self.owner = owner_id()
        self._live: set[str] = set()
        self._lock = threading.Lock()
        self._swept = False
        atexit.register(self.remove_all)

    def why_not(self) -> str | None:
        problem = self.settings.problem()
        return f"docker provider: {problem}" if problem else None

    def judge(self) -> ControllerProvider | None:
        """A provider to judge readiness and build agents with; it names no running VM and is never contacted."""
        return ControllerProvider(ControllerClient("http://127.0.0.1:9"), address=VMAddress(ip="127.0.0.1", server_port=9))

    def acquire(self, downloader: Downloader) -> Lease:
        problem = self.settings.problem()
        if problem:
            raise DockerError(problem)
        with self._lock:
            if not self._swept:
                remove_stale_containers()
                self._swept = True
        container = self._run()
        try:
            address = self._address(container)
            self._wait_ready(container, address)
        except BaseException:
            self._remove(container)
            raise
        provider = ControllerProvider(ControllerClient(address.controller_url), downloader=downloader, address=address)

        def release() -> None:
            try:
                provider.close()
            finally:
                self._remove(container)

        return Lease(provider, release, describe=f"docker {container[:12]} at {address.controller_url}")

    def _run(self) -> str:
        s = self.settings
        args = ["run", "-d", "--label", f"{LABEL}=1", "--label", f"{OWNER_LABEL}={self.owner}",
                "-e", f"DISK_SIZE={s.disk}", "-e", f"RAM_SIZE={s.ram}", "-e", f"CPU_CORES={s.cpus}",
                "--cap-add", "NET_ADMIN", "-v", f"{s.vm_image.resolve()}:/System.qcow2:ro"]
        args += ["--device", "/dev/kvm"] if Path("/dev/kvm").exists() else ["-e", "KVM=N"]
        for port in PORTS.values():
            args += ["-p", f"127.0.0.1::{port}"]
        with self._lock:  # a container is tracked from the moment it exists
            container = _docker(*args, s.docker_image).strip()
            self._live.add(container)
        return container

    def _address(self, container: str) -> VMAddress:
        def host_port(port: int) -> int:
            mapping = _docker("port", container, f"{port}/tcp").splitlines()
            return int(mapping[0].rsplit(":", 1)[1])

        return VMAddress(ip="127.0.0.1", server_port=host_port(PORTS["server"]),
                         chromium_port=host_port(PORTS["chromium"]), vnc_port=host_port(PORTS["vnc"]),
                         vlc_port=host_port(PORTS["vlc"]))

    def _wait_ready(self, container: str, address: VMAddress) -> None:
        """Upstream's health check: the VM is ready when its controller serves a screenshot."""
        deadline = time.monotonic() + self.settings.start_timeout
        while True:
            try:
                if httpx.get(f"{address.controller_url}/screenshot", timeout=10).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            state = _docker("inspect", "-f", "{{.State.Status}}", container).strip()
            if state not in ("created", "running"):
                logs = subprocess.run(["docker", "logs", "--tail", "20", container], capture_output=True, text=True)
                raise DockerError(f"VM container {container[:12]} {state} before its controller answered: "
                                  f"{(logs.stdout + logs.stderr).strip()[-600:]}")
            if time.monotonic() >= deadline:
                raise DockerError(f"VM container {container[:12]}: controller at {address.controller_url} did not "
                                  f"answer within {self.settings.start_timeout:.0f}s (--option vm_start_timeout)")
            time.sleep(1.0)

    def _remove(self, container: str) -> None:
        try:
            _docker("rm", "-f", container, timeout=120)
        except DockerError:
            pass  # gone already, or the daemon is down: the next run's sweep removes it
        with self._lock:
            self._live.discard(container)

    def remove_all(self) -> None:
        with self._lock:
            live = list(self._live)
        for container in live:
            self._remove(container)

    def live(self) -> set[str]:
        with self._lock:
            return set(self._live)


_POOLS: dict[DockerSettings, DockerPool] = {}
_POOLS_LOCK = threading.Lock()


def docker_pool(load: "LoadOptions") -> DockerPool:
    settings = DockerSettings.from_load(load)
    with _POOLS_LOCK:
        if settings not in _POOLS:
            _POOLS[settings] = DockerPool(settings)
        return _POOLS[settings]


def docker_requirement(load: "LoadOptions") -> "Requirement":
    from qitos.benchmark.base import Requirement

    settings = DockerSettings.from_load(load)
    problem = settings.problem()
    if problem:
        return Requirement(name="desktop provider", ok=False, detail=f"docker: {problem}")
    return Requirement(name="desktop provider", ok=True,
                       detail=f"docker: {settings.docker_image} with VM image {settings.vm_image}, one VM per task")

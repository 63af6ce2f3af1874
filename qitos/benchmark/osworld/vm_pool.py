"""Scoring side: which VM a task runs on: one task per VM at a time (a VM has one screen).

`controller` (default): the VMs named by `QITOS_OSWORLD_CONTROLLER` (comma-separated), already running; a task
waits in `prepare` until one is free, so `--concurrency` above their number only queues. `docker`
(`--option provider=docker`): QitOS starts OSWorld's VM in Docker, one container per concurrent task, reverted
to the initial snapshot before each task and removed at exit (`docker_provider.py`).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.osworld.downloads import Downloader
from qitos.benchmark.osworld.lease import Lease, VMPool
from qitos.benchmark.osworld.provider import ENV_CONTROLLER, NO_PROVIDER_REASON, Provider, discover_provider

if TYPE_CHECKING:
    from qitos.benchmark.base import LoadOptions

PROVIDERS = ("controller", "docker")


def provider_kind(options: dict[str, Any]) -> str:
    kind = str(options.get("provider", "controller"))
    if kind not in PROVIDERS:
        raise BenchmarkUsageError(f"--option provider={kind}: choose one of {', '.join(PROVIDERS)}")
    return kind


def controller_urls() -> list[str]:
    """The controllers named by `QITOS_OSWORLD_CONTROLLER` (comma-separated), in order."""
    return [url.strip() for url in os.environ.get(ENV_CONTROLLER, "").split(",") if url.strip()]


class ControllerLeases:
    """Which controllers are busy: one task per desktop at a time, shared by every job of this process."""

    def __init__(self) -> None:
        self._busy: set[str] = set()
        self._changed = threading.Condition()

    def acquire(self, urls: list[str]) -> str:
        with self._changed:
            while True:
                for url in urls:
                    if url not in self._busy:
                        self._busy.add(url)
                        return url
                self._changed.wait(timeout=1.0)

    def release(self, url: str) -> None:
        with self._changed:
            self._busy.discard(url)
            self._changed.notify_all()

    def busy(self) -> set[str]:
        with self._changed:
            return set(self._busy)


LEASES = ControllerLeases()


class ControllerPool:
    """The running VMs of `QITOS_OSWORLD_CONTROLLER`."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls

    def why_not(self) -> str | None:
        return None if self.urls else NO_PROVIDER_REASON

    def judge(self) -> Provider | None:
        return discover_provider({**os.environ, ENV_CONTROLLER: self.urls[0]}) if self.urls else None

    def acquire(self, downloader: Downloader) -> Lease:
        url = LEASES.acquire(self.urls)
        try:
            provider = discover_provider({**os.environ, ENV_CONTROLLER: url}, downloader=downloader)
        except BaseException:
            LEASES.release(url)
            raise
        assert provider is not None

        def release() -> None:
            try:
                provider.client.close()
            finally:
                LEASES.release(url)

        return Lease(provider, release, describe=f"controller {url}")


def vm_pool(load: "LoadOptions") -> VMPool:
    if provider_kind(load.options) == "docker":
        from qitos.benchmark.osworld.docker_provider import docker_pool

        return docker_pool(load)
    return ControllerPool(controller_urls())

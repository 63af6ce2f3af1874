"""Scoring side: a VM held by one task, and what every pool of VMs offers (`vm_pool`, `docker_provider`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from qitos.benchmark.osworld.downloads import Downloader
from qitos.benchmark.osworld.provider import Provider


@dataclass
class Lease:
    """A VM held by one task; `release()` hands it to the next task (idempotent)."""

    provider: Provider
    _release: Callable[[], None]
    describe: str = ""  # which VM, for the row's metadata (e.g. "docker 4f525bb7ab0a at http://127.0.0.1:32768")
    _done: bool = False

    def release(self) -> None:
        if not self._done:
            self._done = True
            self._release()


class VMPool(Protocol):
    def why_not(self) -> str | None:
        """Why no VM can run here (the task ends requires_unavailable with it), or None."""
        ...

    def judge(self) -> Provider | None:
        """A provider to judge readiness with, without contacting or starting a VM (None: no VM possible)."""
        ...

    def acquire(self, downloader: Downloader) -> Lease: ...

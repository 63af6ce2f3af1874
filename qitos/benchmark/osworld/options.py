"""Scoring side: OSWorld's `--option` keys, declared (see `qitos.benchmark.options`): the observation, the desktop
provider and its Docker VM settings (`docker_provider.py`), and the computer-use recipes' own
(`qitos/recipes/osworld.py`)."""

from __future__ import annotations

from typing import Literal

from ..options import BenchmarkOptions, option
from .engine_env import OBSERVATION_TYPES

DEFAULT_IMAGE = "happysixd/osworld-docker"  # upstream's Docker provider image (QEMU running the VM disk image)
SIZE = r"^[1-9][0-9]*[KMGT]?$"


class OsworldOptions(BenchmarkOptions):
    observation: Literal[OBSERVATION_TYPES] = option(  # type: ignore[valid-type]
        "screenshot_a11y_tree", "what the agent sees after each action (a11y_tree for text-only models)")
    settle_seconds: float = option(1.0, "pause after an action before the next screenshot", ge=0)
    provider: Literal["controller", "docker"] = option(
        "controller", "controller: the VMs of $QITOS_OSWORLD_CONTROLLER; docker: one VM container per task in flight")
    vm_image: str | None = option(None, "docker: the OSWorld VM disk image (default <data dir>/osworld-vm/Ubuntu.qcow2)")
    docker_image: str = option(DEFAULT_IMAGE, "docker: the image that runs the VM")
    vm_ram: str = option("4G", "docker: the VM's memory", range="a size such as 4G", pattern=SIZE)
    vm_cpus: int = option(4, "docker: the VM's cores", ge=1)
    vm_disk: str = option("32G", "docker: the VM's disk size", range="a size such as 32G", pattern=SIZE)
    vm_start_timeout: float = option(600.0, "docker: seconds a VM may take to boot", gt=0)
    history: int = option(3, "react-computer-use: observations kept in full (older ones become a note)", ge=1)
    a11y_max_chars: int = option(12000, "react-computer-use: characters of the accessibility tree shown", ge=200)

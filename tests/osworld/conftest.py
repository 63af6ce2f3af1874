"""Fixtures the OSWorld tests share: upstream's evaluators from the data dir, and a test VM on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from osworld_vm_controller import VMController

from qitos.benchmark.osworld import load_evaluators
from qitos.benchmark.osworld.controller import ControllerClient
from qitos.benchmark.osworld.provider import ControllerProvider


@pytest.fixture(scope="module")
def upstream(osworld_data: Path):
    return load_evaluators(osworld_data)


@pytest.fixture
def vm(tmp_path: Path):
    with VMController(tmp_path / "vm") as controller:
        provider = ControllerProvider(ControllerClient(controller.url, timeout=30), sleep=lambda s: None)
        yield controller, provider
        provider.close()

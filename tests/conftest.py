"""Shared test fixtures: where benchmark data lives and how a missing copy is reported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _data_root() -> Path:
    env = os.environ.get("QITOS_DATA_DIR")
    return Path(env).expanduser().resolve() if env else Path.home() / ".cache" / "qitos" / "data"


def require_data(name: str) -> Path:
    """Return the data folder of one benchmark; skip (or fail under QITOS_REQUIRE_DATA=1) when absent."""
    path = _data_root() / name
    if path.exists():
        return path
    message = (
        f"benchmark data '{name}' not found at {path}; run `qit data fetch {name}` "
        "or point QITOS_DATA_DIR at a data directory"
    )
    if os.environ.get("QITOS_REQUIRE_DATA") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def tau_data() -> Path:
    return require_data("tau-bench")


@pytest.fixture(scope="session")
def cybench_data() -> Path:
    return require_data("cybench")


@pytest.fixture(scope="session")
def osworld_data() -> Path:
    return require_data("osworld")

"""Tau-Bench test fixtures: domains loaded once per session, conformance cases as parameters."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.tau_bench import DomainData, ScriptedUser, TauEnv, load_domain


def _conformance_files() -> list[Path]:
    # Same lookup as tests/conftest.py; needed at collection time, before fixtures exist.
    env = os.environ.get("QITOS_DATA_DIR")
    root = Path(env).expanduser().resolve() if env else Path.home() / ".cache" / "qitos" / "data"
    return sorted((root / "tau-bench" / "conformance").glob("*.jsonl"))


def _conformance_cases() -> list[dict[str, Any]]:
    cases = []
    for path in _conformance_files():
        with path.open(encoding="utf-8") as handle:
            cases.extend(json.loads(line) for line in handle if line.strip())
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "conformance_case" in metafunc.fixturenames:
        cases = _conformance_cases()
        if cases:
            metafunc.parametrize("conformance_case", cases, ids=[case["case_id"] for case in cases])
        else:  # no data: a single case that the tau_data fixture skips (or fails under QITOS_REQUIRE_DATA=1)
            metafunc.parametrize("conformance_case", [None], ids=["no-data"])


@pytest.fixture(scope="session")
def retail(tau_data: Path) -> DomainData:
    return load_domain(tau_data, "retail")


@pytest.fixture(scope="session")
def airline(tau_data: Path) -> DomainData:
    return load_domain(tau_data, "airline")


@pytest.fixture(scope="session")
def domains(retail: DomainData, airline: DomainData) -> dict[str, DomainData]:
    return {"retail": retail, "airline": airline}


def stop_env(domain: DomainData, task_index: int, split: str = "test") -> TauEnv:
    """A reset env whose user answers every respond with ###STOP### (how the fixtures were made)."""
    env = TauEnv(domain, task_index, split, user=ScriptedUser(["I need some help."]))
    env.reset()
    return env

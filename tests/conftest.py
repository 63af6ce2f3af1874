"""Shared test fixtures: where benchmark data lives and how a missing copy is reported."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# Started as a background job (`nohup ... &`, some CI runners), pytest inherits SIGINT ignored, and so would
# every `qit` it starts: the Ctrl-C tests would then test nothing. Children of a process with a handler get
# the default disposition back, as they would from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


def require_tokenizer(name: str = "cl100k_base"):
    """A tiktoken encoding (gpt-4's by default), offline (`qit data fetch tokenizer`); skip, or fail under
    QITOS_REQUIRE_DATA=1."""
    from qitos.models import tokenizer

    try:
        if name == tokenizer.GPT4:
            return tokenizer.gpt4_encoding()
        tokenizer.activate(name)
        import tiktoken

        return tiktoken.get_encoding(name)
    except tokenizer.TokenizerMissing as exc:
        if os.environ.get("QITOS_REQUIRE_DATA") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def require_system(ok: bool, what: str) -> None:
    """Skip when a system tool (bwrap, Xvfb, Chromium, ...) is missing; fail instead in CI.

    `.ci/run` installs every such tool, so there a missing one is a broken setup, not a reason to skip.
    """
    if ok:
        return
    message = f"needs {what}"
    if os.environ.get("CI", "").lower() in ("1", "true") or os.environ.get("QITOS_REQUIRE_SYSTEM") == "1":
        pytest.fail(message + " (CI installs it: see .ci/run)")
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


def _strict() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true") or os.environ.get("QITOS_REQUIRE_SYSTEM") == "1"


def _no_skips_in_ci(report) -> None:
    """In CI everything a test needs is installed, so any skip (importorskip, skipif, ...) is a failure."""
    if _strict() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every requirement is installed: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _no_skips_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _no_skips_in_ci(outcome.get_result())


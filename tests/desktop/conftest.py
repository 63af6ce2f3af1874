"""Desktop test fixtures: skip cleanly where no X tooling exists, and prove no process outlives the session.

Every process the session starts inherits a unique marker in its environment, so the leak check finds exactly
our Xvfb/openbox/app processes even when other test sessions on the machine run their own desktops.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from qitos.benchmark.desktop import requirements

from .procs import MARKER, marked_processes
from tests.conftest import require_system


@pytest.fixture(scope="package")
def session_token(no_leftover_processes: str) -> str:
    return no_leftover_processes


@pytest.fixture(scope="package", autouse=True)
def no_leftover_processes() -> Iterator[str]:
    """Mark the desktop tests' processes, run the tests, then fail if any desktop/app process they started is
    still alive. Per package, not per session: under pytest-xdist a worker runs other folders' tests between
    these, and their processes (a Ray guard exiting a moment late) are not the desktop's leftovers."""
    token = uuid.uuid4().hex
    previous = os.environ.get(MARKER)
    os.environ[MARKER] = token
    yield token
    leftovers = [p for p in marked_processes(token) if any(k in p[1] for k in ("Xvfb", "openbox", "qitos"))]
    if previous is None:
        os.environ.pop(MARKER, None)
    else:
        os.environ[MARKER] = previous
    assert not leftovers, f"processes left running after the desktop tests: {leftovers}"


@pytest.fixture(scope="session")
def desktop_ready() -> None:
    """Skip (or fail in CI) when Xvfb, openbox, xdotool or tkinter are missing."""
    missing = requirements()
    require_system(not missing, "; ".join(missing))

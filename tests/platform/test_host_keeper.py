"""The agent host's keeper (`qitos/run/sides/keeper.py`): nothing of a host's process group outlives the host or
the scoring process that started it, also a process that has not tied its life to bwrap yet (bwrap's sandbox child
in its first milliseconds, played here by a detached `sleep`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

import qitos.run.sides.keeper as keeper

KEEPER = str(Path(keeper.__file__))


def _with_marker(marker: str) -> list[int]:
    """Live processes whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in command and state != "Z":
            found.append(int(entry))
    return found


def _gone(marker: str, within: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within
    while (left := _with_marker(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:  # a failing test leaves nothing behind
        os.kill(pid, signal.SIGKILL)
    return left


def _argv_file(argv: list[str]):
    handle = tempfile.TemporaryFile()
    handle.write(b"".join(a.encode() + b"\0" for a in argv))
    handle.seek(0)
    return handle


def test_what_the_host_left_in_its_group_ends_with_it() -> None:
    """The host's command ends at once, leaving a process of its group behind: the keeper kills it."""
    marker = f"{300 + uuid.uuid4().int % 1000}.{os.getpid()}"
    lifeline, held = os.pipe()
    with _argv_file(["/bin/sh", "-c", f"sleep {marker} & exit 0"]) as argv:
        run = subprocess.run([sys.executable, "-I", "-S", KEEPER, str(argv.fileno()), str(lifeline)],
                             pass_fds=[argv.fileno(), lifeline], start_new_session=True, timeout=30)
    os.close(lifeline)
    os.close(held)
    assert run.returncode == -signal.SIGKILL  # the keeper ends its group, itself included
    assert not _gone(marker), "a process of the host's group outlived it"


@pytest.mark.parametrize("after", [0.0, 0.3])
def test_the_host_group_ends_when_its_owner_is_killed(after: float) -> None:
    """A stand-in scoring process starts a host through the keeper, holding the write end of its lifeline, and
    is SIGKILLed (at once, and later): every process of the host's group is gone."""
    marker = f"{300 + uuid.uuid4().int % 1000}.{os.getpid()}"
    scoring = textwrap.dedent(f"""
        import os, subprocess, sys, tempfile, time
        argv = tempfile.TemporaryFile()
        argv.write(b"".join(a.encode() + b"\\0" for a in ["/bin/sh", "-c", "sleep {marker} & sleep {marker}"]))
        argv.seek(0)
        lifeline, held = os.pipe()
        subprocess.Popen([sys.executable, "-I", "-S", {KEEPER!r}, str(argv.fileno()), str(lifeline)],
                         pass_fds=[argv.fileno(), lifeline], start_new_session=True)
        os.close(lifeline)
        print("started", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", scoring], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    time.sleep(after)
    proc.kill()
    proc.wait()
    assert not _gone(marker), "the host's group outlived the scoring process"


def test_workers_adopt_the_agent_hosts_started_while_planning(tmp_path) -> None:
    """`--workers 2`: two agent hosts in all (planning's, taken by the first worker, and one spawned during planning
    for the second), not one more per worker at its first task; every row done, nothing of a host left after."""
    from tests.support.openai_server import OpenAIServer
    from tests.support.reaper import _parent, descendants

    from .conftest import REPO, rows, write_tasks
    from .test_outside_failures import _answer

    write_tasks(tmp_path / "tasks.jsonl", 8)
    with OpenAIServer(default=_answer, latency_seconds=0.3) as server:
        command = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root",
                   str(tmp_path / "tasks.jsonl"), "--model-name", "m", "--base-url", server.base_url,
                   "--api-key-env", "FAULT_TEST_KEY", "--output", str(tmp_path / "r.jsonl"), "--trace-logdir",
                   str(tmp_path / "runs"), "--concurrency", "2", "--workers", "2"]
        run = subprocess.Popen(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "FAULT_TEST_KEY": "k"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        hosts: set[int] = set()
        while run.poll() is None:
            # keepers are children of qit (a keeper's own child has its command line too until it execs bwrap)
            hosts |= {pid for pid, cmd in descendants(run.pid).items()
                      if "qitos/run/sides/keeper.py" in cmd and _parent(pid) == run.pid}
            time.sleep(0.02)
        assert run.returncode == 0, run.stderr.read()[-2000:]
    assert len(hosts) == 2, f"agent hosts started: {len(hosts)}"
    assert sorted(r["task_id"] for r in rows(tmp_path / "r.jsonl")) == sorted(f"t{i}" for i in range(8))
    deadline = time.monotonic() + 5
    while (left := [p for p in hosts if p in _with_marker("qitos/run/sides/keeper.py")]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, "an agent host outlived the run"

"""Is the process that writes a run still alive? A PID alone can lie: after the writer dies the system may
give its number to an unrelated process. The writer also records when its process started (Linux
`/proc/<pid>/stat`), and a live PID whose start time differs is somebody else."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Does a process with this id exist on this host?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_started(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: fields resume after the last ')'
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


_STARTED: dict[int, int | None] = {}


def own_start() -> int | None:
    """This process's start time (cached per pid: a forked worker has its own)."""
    pid = os.getpid()
    if pid not in _STARTED:
        _STARTED[pid] = process_started(pid)
    return _STARTED[pid]


def writer_alive(pid: int, started: int | None) -> bool:
    """Is the writer (pid, and its start time when recorded) still the process running under that pid?"""
    if not pid_alive(pid):
        return False
    if started is None:
        return True  # recorded by an older writer, or a system without /proc
    now = process_started(pid)
    return now is None or now == started

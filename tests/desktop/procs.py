"""Process checks for the desktop tests: is a pid still running, and which processes did this session start."""

from __future__ import annotations

import os
import time
from pathlib import Path

MARKER = "QITOS_DESKTOP_TEST_SESSION"


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie left for an init that does not reap (as in some sandboxes)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def marked_processes(token: str) -> list[tuple[int, str]]:
    """Live processes whose environment carries this session's marker, with their command lines."""
    needle = f"{MARKER}={token}".encode()
    found: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0") or gone(int(entry.name)):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(entry.name), cmdline))
    return found

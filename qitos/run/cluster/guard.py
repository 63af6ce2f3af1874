"""A local Ray started by qit ends with qit, SIGKILL of qit included.

Ray ties most of its processes to the driver that started them (the kernel's parent-death signal), but its
agents (the dashboard and runtime-env agents) are children of the raylet and can outlive it, as can anything
a job started. So qit starts this guard beside its local Ray: a small process that keeps the list of qit's
descendants (pid and start time, so a reused pid is never hit) and, once qit is gone, kills whatever of them
is still there. `python -m qitos.run.cluster.guard <qit's pid>`; stdlib only, so it starts fast.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

INTERVAL = 0.3


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) of every live process."""
    out: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            out[int(entry)] = (int(fields[1]), fields[19])
    return out


def _below(roots: set[int], table: dict[int, tuple[int, str]]) -> set[int]:
    found: set[int] = set()
    frontier = list(roots)
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def start(driver: int | None = None) -> subprocess.Popen | None:
    """Start the guard of this process (Linux only: it reads /proc)."""
    if not sys.platform.startswith("linux"):
        return None
    return subprocess.Popen([sys.executable, "-m", "qitos.run.cluster.guard", str(driver or os.getpid())],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    driver = int(sys.argv[1])
    me = os.getpid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: qit handles it
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    known: dict[int, str] = {}
    while os.getppid() == driver:
        table = _table()
        for pid in _below({driver}, table) - {me}:
            known[pid] = table[pid][1]
        time.sleep(INTERVAL)
    for _ in range(3):  # what is left of qit's descendants, and what they started since the last look
        table = _table()
        alive = {pid for pid, start_time in known.items() if pid in table and table[pid][1] == start_time}
        targets = alive | (_below(alive, table) - {me})
        if not targets:
            return
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(INTERVAL)


if __name__ == "__main__":
    main()

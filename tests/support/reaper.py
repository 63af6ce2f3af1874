"""Run a command, signal it once, and report which of its descendants outlived it.

`python -m tests.support.reaper --after 2.5 --signal TERM --linger 2 [--start-when PATH[:LINES]] -- qit ...`

With `--victim worker|agent|agent-host` the signal goes to that process of the run instead (a forked worker, an
agent process, the agent host), and the command is left to finish.

`--after` counts from the start of the command, or from when PATH first exists (e.g. the trace directory the
run creates once planning is done) or holds LINES lines (rows in a results file), so a kill can be aimed at a
phase of the run.

This process makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so every process the command starts,
however it detaches (forked workers, a new session, bwrap), is re-parented here when its own parent dies, and
can be found by walking parent pids. After the signal it waits for the command to exit, gives the rest up to
`--linger` seconds to go, then prints one JSON line: the command's exit code, when it was signalled, and the
command lines of the survivors. Survivors are then killed so a failing test leaves nothing behind.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def has_memory(pid: int) -> bool:
    """Does the process still have an address space? One that has released it (an empty command line, no VmSize)
    is past the point of exiting where it could run code again: it is only waiting to become a zombie."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            return any(line.startswith(b"VmSize:") for line in fh)
    except OSError:
        return False


def descendants(root: int) -> dict[int, str]:
    """Live (non-zombie) processes below `root`, with their command lines."""
    parents: dict[int, int] = {}
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
            parents[int(entry)] = int(fields[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as fh:
                        found[child] = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:
                    continue
                frontier.append(child)
    return found


def find_victim(me: int, command_pid: int, victim: str, rng) -> int | None:
    """A process of the run to kill: `qit` (the command itself), `worker` (a forked --workers process: the
    command's own command line under another pid), `agent` (a process running agent jobs: a child of the agent
    host in --agent-processes task, the host itself in batch) or `agent-host` (the host)."""
    found = descendants(me)
    own = found.get(command_pid)
    hosts = {pid for pid, cmd in found.items() if "qitos.run.sides.zygote" in cmd and not cmd.startswith("bwrap")}
    if victim == "qit":
        return command_pid
    if victim == "worker":
        pool = [pid for pid, cmd in found.items() if pid != command_pid and cmd == own]
    elif victim == "agent-host":
        pool = [pid for pid in hosts if _parent(pid) not in hosts]
    else:
        children = [pid for pid in hosts if _parent(pid) in hosts]
        pool = children or [pid for pid in hosts if _parent(pid) not in hosts]
    return rng.choice(sorted(pool)) if pool else None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _default_stop_signals() -> None:
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _reached(mark: str) -> bool:
    path, _, lines = mark.rpartition(":") if mark.rpartition(":")[2].isdigit() else (mark, "", "")
    if not os.path.exists(path):
        return False
    if not lines:
        return True
    with open(path, "rb") as fh:
        return fh.read().count(b"\n") >= int(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--after", type=float, required=True, help="seconds before the signal")
    parser.add_argument("--signal", required=True, help="TERM, HUP, KILL, INT")
    parser.add_argument("--linger", type=float, default=2.0)
    parser.add_argument("--start-when", default=None, help="count --after from when this path exists")
    parser.add_argument("--victim", default=None, choices=("qit", "worker", "agent", "agent-host"),
                        help="signal this process of the run instead of the command (see find_victim)")
    parser.add_argument("--seed", default="0", help="which victim, when several match")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    me = os.getpid()
    # the command starts with the stop signals at their defaults, however this test was started (under `nohup`
    # SIGHUP is ignored, and qit keeps an ignored signal ignored)
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sys.stderr, preexec_fn=_default_stop_signals)
    signalled = False
    if args.start_when:
        while not _reached(args.start_when) and child.poll() is None:
            time.sleep(0.01)
    deadline = time.monotonic() + args.after
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.02)
    victim = None
    if args.victim:
        import random

        rng = random.Random(args.seed)
        while child.poll() is None and not signalled:  # a victim that ended just before the signal: another one
            victim = find_victim(me, child.pid, args.victim, rng)
            if victim is None:
                time.sleep(0.02)
                continue
            try:
                os.kill(victim, getattr(signal, f"SIG{args.signal}"))
                signalled = True
            except ProcessLookupError:
                pass
    elif child.poll() is None:
        child.send_signal(getattr(signal, f"SIG{args.signal}"))
        signalled = True
    try:
        code = child.wait(timeout=180 if args.victim else 30)
    except subprocess.TimeoutExpired:
        code = None
    end = time.monotonic() + args.linger
    while descendants(me) and time.monotonic() < end:
        reap()
        time.sleep(0.05)
    reap()
    # A process caught in the middle of exiting has no command line any more: it is no leftover, but it must
    # still finish (become a zombie, reaped here) within a bound; one that does not is reported as such. The bound
    # allows for a loaded machine, where a killed process can wait many seconds on the disk (a thread in syncfs)
    # before it is gone. Until it is gone it still holds its sockets, and a process that waits for one of them to
    # close (an agent host for its control socket) only starts to exit then: the rest get `--linger` seconds more
    # from that moment.
    end = time.monotonic() + 60.0
    stuck = False
    while any(not has_memory(pid) for pid in descendants(me)) and time.monotonic() < end:
        stuck = True
        reap()
        time.sleep(0.05)
    reap()
    settle = time.monotonic() + (args.linger if stuck else 0.0)
    while descendants(me) and time.monotonic() < settle:
        reap()
        time.sleep(0.05)
    reap()
    survivors = {pid: (cmd if has_memory(pid) else f"pid {pid} stuck exiting") or f"pid {pid} (no command line)"
                 for pid, cmd in descendants(me).items()}
    print(json.dumps({"code": code, "signalled": signalled, "survivors": sorted(survivors.values())}), flush=True)
    for pid in survivors:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.2)
    reap()


if __name__ == "__main__":
    main()

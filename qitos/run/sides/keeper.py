"""The confined agent host's keeper: the host's whole process group ends with the process that owns the host.

bwrap's `--die-with-parent` has the kernel kill bwrap when its parent dies, but bwrap alone: in its first
milliseconds, bwrap's sandbox child has not yet tied itself to bwrap (it waits on an eventfd for bwrap to map
its uids), and when bwrap is killed then, that child waits forever, an orphan no one knows. Measured here:
killing bwrap 0-10 ms after its start left its sandbox running in 183 of 260 tries; killing its process group,
in none. So the scoring side starts `python -I -S keeper.py FD LIFELINE` as the leader of a new session; the
keeper starts bwrap in its group (argv NUL-separated in FD) and kills the group when bwrap has ended or when
LIFELINE, a pipe's read end, reaches its end: the write end is held by the host's owner alone (a `--workers`
process that adopted a host started by its parent included: `AgentHost.release`), so it ends however the owner
dies, SIGKILL too, and never while the owner lives.

Stdlib only, no site-packages (`-I -S`): it starts in a few milliseconds and runs nothing of the agent's.
"""

from __future__ import annotations

import os
import select
import signal
import sys


def _end_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)  # this process included: nothing of the host is left


def main() -> None:
    fd, lifeline = int(sys.argv[1]), int(sys.argv[2])
    with os.fdopen(fd, "rb") as handle:
        argv = [a.decode() for a in handle.read().split(b"\0") if a]
    signal.signal(signal.SIGCHLD, _end_group)  # bwrap ended
    child = os.fork()
    if child == 0:
        try:
            os.close(lifeline)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.closerange(3, lifeline)  # bwrap's fds (the host's control socket) are bwrap's alone
    os.closerange(lifeline + 1, os.sysconf("SC_OPEN_MAX"))
    while True:
        select.select([lifeline], [], [])  # readable only at its end: nothing is ever written to it
        if not os.read(lifeline, 1):
            _end_group()


if __name__ == "__main__":
    main()

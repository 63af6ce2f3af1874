"""The confined agent host's keeper: the host's whole process group ends with the scoring process.

bwrap's `--die-with-parent` has the kernel kill bwrap when its parent dies, but bwrap alone: in its first
milliseconds, bwrap's sandbox child has not yet tied itself to bwrap (it waits on an eventfd for bwrap to map
its uids), and when bwrap is killed then, that child waits forever, an orphan no one knows. Measured here:
killing bwrap 0-10 ms after its start left its sandbox running in 183 of 260 tries; killing its process group,
in none. So the scoring side starts `python -I -S keeper.py FD PARENT` as the leader of a new session; the
keeper starts bwrap in its group (argv NUL-separated in FD), and kills the group when the scoring process
(PARENT) dies (the kernel's parent-death signal) and when bwrap has ended, so nothing of a host outlives it.

Stdlib only, no site-packages (`-I -S`): it starts in a few milliseconds and runs nothing of the agent's.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _end_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)  # this process included: nothing of the host is left


def main() -> None:
    fd, parent = int(sys.argv[1]), int(sys.argv[2])
    with os.fdopen(fd, "rb") as handle:
        argv = [a.decode() for a in handle.read().split(b"\0") if a]
    signal.signal(signal.SIGTERM, _end_group)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the scoring process died before the line above took effect
        _end_group()
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # bwrap's fds (the host's control socket) are bwrap's alone
    os.waitpid(child, 0)
    _end_group()


if __name__ == "__main__":
    main()

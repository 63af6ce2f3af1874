"""One run per results file: an exclusive lock held from planning to the end of the run.

Two runs appending to one `--output` would run every task twice (issue 32: 80 rows for 40 tasks). The lock is
`flock` on `<file>.lock` beside the results file, so it is released by the kernel when the run's processes end,
however they end (SIGKILL included): a stale lock file never blocks the next run.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from qitos.benchmark.errors import BenchmarkUsageError


class RunLock:
    """One run per results file: an exclusive lock on `<file>.lock` beside it, held until `release` (or the
    process, and any worker it forked, ends). The lock file keeps the holder's PID for the refusal's message and
    is removed on release; a lock taken on a file removed meanwhile is taken again on the current one."""

    def __init__(self, results: Path) -> None:
        self.path = results.with_name(results.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise BenchmarkUsageError(
                    f"{self.path.with_name(self.path.name[:-5])} is being written by another run (pid {holder}); "
                    "wait for it to end, or give this run another --output") from None
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)  # the holder removed it as we opened it: lock the current one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)  # while still held: no other run has it
            os.close(self._fd)
            self._fd = None

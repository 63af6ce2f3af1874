"""Group commit for trace and results files: fast appends now, fsync batched, durability on demand.

Writing a step must not cost a disk flush (several milliseconds here) per file: with many runs in
flight that serializes everything on the disk. Instead writers flush to the OS (enough to survive
a killed process: the page cache outlives it) and mark their filesystem dirty; one background
thread makes dirty filesystems durable with `syncfs` every `interval` seconds, and `sync()` gives a
synchronous guarantee (used when a run ends and when a result row is appended). Concurrent
`sync()` callers share one flush (group commit).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
from pathlib import Path

_libc = None


def _syncfs(fd: int) -> bool:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _libc.syncfs  # noqa: B018 - probe that the symbol exists
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return False
    return _libc.syncfs(fd) == 0


class Flusher:
    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self._lock = threading.Lock()  # guards the counters below
        self._sync_lock = threading.Lock()  # one flush at a time
        self._dirty: dict[int, str] = {}  # st_dev -> a directory on that filesystem
        self._written = 0  # bumped by every write
        self._durable = 0  # every write numbered <= this is on disk
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def mark_dirty(self, path: Path | str) -> int:
        """Record a write to the filesystem holding `path`; returns its ticket."""
        directory = str(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)))
        return self.mark_device(os.stat(directory).st_dev, directory)

    def mark_device(self, device: int, directory: Path | str) -> int:
        """`mark_dirty` for a caller that already knows the filesystem (no stat per write)."""
        with self._lock:
            self._dirty[device] = str(directory)
            self._written += 1
            ticket = self._written
        self._ensure_thread()
        return ticket

    def sync(self, ticket: int | None = None) -> None:
        """Return once every write up to `ticket` (default: all so far) is durable."""
        with self._lock:
            target = self._written if ticket is None else ticket
        if self._durable >= target:
            return
        with self._sync_lock:
            if self._durable >= target:
                return  # another caller's flush covered us
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            dirty, self._dirty = self._dirty, {}
            upto = self._written
        for directory in dirty.values():
            try:
                fd = os.open(directory, os.O_RDONLY)
            except OSError:
                continue
            try:
                if not _syncfs(fd):
                    os.sync()
            finally:
                os.close(fd)
        self._durable = max(self._durable, upto)

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._loop, name="qitos-flusher", daemon=True)
                    self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval)
            if self._durable < self._written:
                with self._sync_lock:
                    self._flush()


    def reset_after_fork(self) -> None:
        """In a forked child: fresh locks and no flusher thread (the parent's may have held a lock at fork)."""
        self.__init__(self.interval)  # type: ignore[misc]


FLUSHER = Flusher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=FLUSHER.reset_after_fork)

"""Group commit for trace and results files: fast appends now, fsync batched, durability on demand.

Writing a step must not cost a disk flush (several milliseconds here) per file: with many runs in
flight that serializes everything on the disk. Instead writers flush to the OS (enough to survive
a killed process: the page cache outlives it) and mark the paths they wrote dirty; one background
thread fsyncs the files and directories that have been dirty for `interval` seconds, `sync()` gives a
synchronous guarantee (used when a run ends and when a result row is appended), and `sync_paths()` one
for given paths (a batch of result rows and their traces: `commit.RowCommitter`). Concurrent `sync()`
callers share one flush (group commit).

Only the files written are flushed, never the whole filesystem (`syncfs`): on a busy machine a
filesystem-wide flush waits for everyone else's dirty pages too (seconds under load), and a process
blocked in it cannot even exit when it is killed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path


def fsync_path(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # gone (a temp file swapped away, a run removed): nothing left to make durable
    try:
        os.fsync(fd)
    except OSError:
        pass  # EINVAL on filesystems without fsync; a failed write already raised where it was made
    finally:
        os.close(fd)


def write_flushed(path: str | Path, data: bytes, *, replace: bool = False) -> None:
    """Create `path` with `data`, on disk when this returns; never through a symlink, and never over an existing
    file unless `replace`. For content written once and then only linked or named (a trace's kept sources)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if replace else os.O_EXCL)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fd)


BACKGROUND_SECONDS = 0.5  # what is still being written (runs in progress) is flushed once it has waited this long


class Flusher:
    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self._lock = threading.Lock()  # guards the counters below
        self._sync_lock = threading.Lock()  # one flush at a time
        self._dirty: dict[str, float] = {}  # files and directories written since their last flush: since when
        self._written = 0  # bumped by every write
        self._durable = 0  # every write numbered <= this is on disk
        self._thread: threading.Thread | None = None

    def mark_dirty(self, path: Path | str) -> int:
        """Record a write at `path`; returns its ticket. A file is flushed with its directory (new names);
        a directory (a trace's run folder) with the files directly inside it."""
        path = os.path.abspath(path)
        if os.path.isdir(path):
            return self.mark_files([path, *_files_in(path)])
        return self.mark_files((path, os.path.dirname(path)))

    def mark_files(self, paths: Iterable[str]) -> int:
        """`mark_dirty` for a caller that knows exactly which paths it wrote (no stat per write)."""
        now = time.monotonic()
        with self._lock:
            for path in paths:
                self._dirty.setdefault(path, now)
            self._written += 1
            ticket = self._written
        self._ensure_thread()
        return ticket

    def sync_paths(self, paths: Iterable[str]) -> None:
        """Make exactly these paths durable now (files before directories, a folder before the one naming it: a name
        made durable points at durable content) and take them off the dirty set; whatever else is dirty (runs still
        in progress) waits for the background flush. A result row's commit needs its own trace and the results
        file, not every file written meanwhile: flushing all of them made each commit fsync the files of every run
        in flight."""
        wanted = {os.path.abspath(p) for p in paths}
        with self._lock:
            # a path written again after this is marked again (the write comes before its mark), so nothing
            # written after the fsyncs below is taken off unflushed
            for path in wanted:
                self._dirty.pop(path, None)
        for path in sorted(wanted, key=lambda p: (os.path.isdir(p), -p.count(os.sep))):  # deeper folders first
            fsync_path(path)

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

    def _flush(self, older_than: float | None = None) -> None:
        """Flush what is dirty (`older_than`: only what was first written before then; the rest stays dirty)."""
        with self._lock:
            if older_than is None:
                dirty, self._dirty = list(self._dirty), {}
            else:
                dirty = [path for path, since in self._dirty.items() if since <= older_than]
                for path in dirty:
                    del self._dirty[path]
            everything = not self._dirty
            upto = self._written
        # files before directories: a directory entry made durable points at durable content
        for path in sorted(dirty, key=os.path.isdir):
            fsync_path(path)
        if everything:
            self._durable = max(self._durable, upto)

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._loop, name="qitos-flusher", daemon=True)
                    self._thread.start()

    def _loop(self) -> None:
        """Flush what has waited at least `interval`: a write is on disk within about twice that, and a run that
        ends sooner is flushed once, by its row's commit (`sync_paths`), not also here (at zero model latency this
        flushed almost every run in flight a second time: 0.9 fsyncs per task)."""
        while True:
            time.sleep(self.interval)
            if self._durable < self._written:
                with self._sync_lock:
                    self._flush(older_than=time.monotonic() - self.interval)

    def reset_after_fork(self) -> None:
        """In a forked child: fresh locks and no flusher thread (the parent's may have held a lock at fork)."""
        self.__init__(self.interval)  # type: ignore[misc]


# The sources a trace keeps (`agent_code/`, `code_identity.STORE_DIR`) and their index are links to files flushed
# once for the batch (the snapshot of the runner's code, `code_snapshot`; the index, `job_context._LinkedSources`),
# or files flushed as they are written (`write_flushed`): a commit flushes that folder's names only. Flushing every
# link again cost 17 fsyncs per task.
LINKED_FOLDERS = frozenset({"agent_code"})


def run_paths(run_dir: str | Path) -> list[str]:
    """What makes a finished run's trace durable: the files in its folder and in the folders in it (`assets/` or
    `screens/`, its screenshots; not the sources in `agent_code/`, see above), each of those folders, the run's
    folder and the folder that names it. Not hidden names such as the writer's temporary
    (`.manifest.json.<pid>.tmp`): it holds an old manifest that the seal overwrites, so flushing it made nothing
    durable (one fsync per run in six)."""
    run_dir = os.path.abspath(run_dir)
    paths: list[str] = []
    try:
        with os.scandir(run_dir) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.is_file(follow_symlinks=False):
                    paths.append(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name not in LINKED_FOLDERS:
                        paths += _files_in(entry.path, hidden=False)
                    paths.append(entry.path)
    except OSError:
        pass
    return [*paths, run_dir, os.path.dirname(run_dir)]


def _files_in(folder: str, hidden: bool = True) -> list[str]:
    """The regular files directly in `folder` (by their directory entries' types: no stat per file)."""
    try:
        with os.scandir(folder) as entries:
            return [e.path for e in entries if (hidden or not e.name.startswith(".")) and e.is_file(follow_symlinks=False)]
    except OSError:
        return []


FLUSHER = Flusher(interval=BACKGROUND_SECONDS)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=FLUSHER.reset_after_fork)

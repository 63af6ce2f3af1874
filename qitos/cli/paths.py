"""Filesystem and port failures as one line naming the path and the fix, never a traceback (issue 32 item 5).

`check_output_file` refuses an `--output` that cannot be written before anything runs (a directory, a
read-only or unwritable place); `os_error_line` words any OSError that still escapes a command (a disk that
fills mid-run, a folder made read-only meanwhile), with the exit code it deserves; `say_disk_full` names the
tasks a full disk ended; `removed_if_failed` takes back the empty folders a failed command made.
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import EXIT_RUN_FAILED, EXIT_USAGE, UsageError

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
RERUN = "rerun the same command: finished rows are kept and the rest run again"


def _why_not_writable(folder: Path) -> str | None:
    """Why nothing can be created in `folder` (None: it can)."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    return None


def check_output_file(path: Path, flag: str = "--output") -> None:
    """`path` must be a file that can be created or appended to (checked before the run writes anything)."""
    if path.is_dir() or str(path).endswith(("/", os.sep)):
        raise UsageError(f"{flag} {path}: is a directory, not a file; give a file in it, e.g. "
                         f"{flag} {Path(path) / 'results.jsonl'}")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: {folder} is a file, not a folder; choose another {flag}")
    why = _why_not_writable(folder)
    if why is None and path.exists() and not os.access(path, os.W_OK):
        why = "permission denied"
    if why:
        at = os.path.abspath(path if path.exists() else folder)
        raise UsageError(f"{flag} {path}: cannot write there ({why} at {at}); choose a writable place with {flag}")


def os_error_line(exc: OSError) -> tuple[str, int] | None:
    """The one line (without `error: `) and the exit code for a filesystem error that reached the command;
    None for any other OSError (a connection, say), which is not this module's to word."""
    where = exc.filename or "a file"
    what = exc.strerror or str(exc)
    if exc.errno in DISK_FULL:
        return (f"{what} writing {where}: the disk is full; free some space (or write to another disk), then run "
                "the same command again: what it finished is kept", EXIT_RUN_FAILED)
    fixes = {
        errno.EROFS: "it is on a read-only file system; choose a place on a writable one",
        errno.EISDIR: "a directory is where a file is expected; give a file path (e.g. --output results/run.jsonl)",
        errno.ENOTDIR: "a file is where a folder is expected; choose another path",
        errno.EACCES: "permission denied; fix its permissions or choose another path",
        errno.EPERM: "operation not permitted; fix its permissions or choose another path",
        errno.ENAMETOOLONG: "the name is too long; choose a shorter path",
        errno.EMFILE: "too many open files; raise the limit (ulimit -n) or lower --concurrency",
    }
    fix = fixes.get(exc.errno)
    if fix is None:
        return None
    return f"{where}: {fix}", EXIT_RUN_FAILED if exc.errno == errno.EMFILE else EXIT_USAGE


def say_disk_full(count: int, trace_logdir: Path) -> None:
    """One line when tasks ended because the disk filled: what to free, and that a plain rerun runs them."""
    import sys

    if count:
        sys.stderr.write(f"error: {count} task(s) ended disk_full (no space left writing their traces under "
                         f"{trace_logdir}); free some space, then {RERUN}\n")


@contextmanager
def removed_if_failed(*folders: Path) -> Iterator[None]:
    """Folders this command creates are removed again, when still empty, if it fails."""
    made = [f for f in folders if not f.exists()]
    try:
        yield
    except BaseException:
        for folder in made:
            try:
                folder.rmdir()  # only an empty folder: nothing written is ever removed
            except OSError:
                pass
        raise

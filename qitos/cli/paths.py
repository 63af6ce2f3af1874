"""Output paths checked before a command writes anything, one line naming the path and the fix (issue 32 item 5).

`check_output_file` refuses an `--output` that cannot be written before anything runs (a directory, a
read-only or unwritable place); `say_disk_full` names the tasks a full disk ended; `removed_if_failed` takes
back the empty folders a failed command made. An OSError that still escapes a command is worded by
`errors.os_error_line`.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import UsageError

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

"""How the CLI reports user mistakes: one clear line on stderr and exit code 2, never a traceback; a filesystem
failure (a full disk, a read-only folder) as one line naming the path and the fix (issue 32 item 5)."""

from __future__ import annotations

import errno
import functools
import sys
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE = 0, 1, 2
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class UsageError(Exception):
    """A problem the user can fix by changing a flag, a file or the environment."""


def _user_error_types() -> tuple[type[BaseException], ...]:
    from qitos.core.task import TaskValidationError
    from qitos.core.tools import ToolDefinitionError
    from qitos.models.base import ModelConfigError
    from qitos.trace.reader import TraceReadError
    from qitos.trace.writer import TraceDirError

    types: list[type[BaseException]] = [UsageError, ModelConfigError, TaskValidationError, TraceDirError,
                                        ToolDefinitionError, TraceReadError]
    try:
        from qitos.benchmark.errors import BenchmarkUsageError

        types.append(BenchmarkUsageError)
    except ImportError:
        pass
    return tuple(types)


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


def fail(message: str, code: int = EXIT_USAGE) -> None:
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)


def user_errors(fn: F) -> F:
    """Turn user mistakes raised anywhere below a command into `error: ...` + exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _user_error_types() as exc:
            fail(str(exc))
        except OSError as exc:  # a full disk, a read-only folder, a directory where a file belongs: one line
            line = os_error_line(exc)
            if line is None:
                raise
            fail(*line)

    return wrapper  # type: ignore[return-value]

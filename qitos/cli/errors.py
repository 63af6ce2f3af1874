"""How the CLI reports user mistakes: one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE = 0, 1, 2


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
            from .paths import os_error_line

            line = os_error_line(exc)
            if line is None:
                raise
            fail(*line)

    return wrapper  # type: ignore[return-value]

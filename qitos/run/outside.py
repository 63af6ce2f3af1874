"""Telling a failure of the machine from a failure of the agent, where the stop reason alone does not say.

The stop reasons that name such failures are one list, `qitos.core.stop.OUTSIDE_AGENT`; this module recognizes
the ones that arrive as exceptions or error text: a full disk or quota (ENOSPC, EDQUOT) while a task's trace,
work dir or agent wrote to it becomes `disk_full`, not the agent's `error`.
"""

from __future__ import annotations

import errno

from qitos.core.stop import is_disk_full

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(error: BaseException | str | None) -> bool:
    """Did this exception (or the error text a run recorded) come from a full disk or quota?"""
    if isinstance(error, BaseException):
        return is_disk_full(error)
    return bool(error) and any(f"[Errno {n}]" in error for n in _DISK_FULL)

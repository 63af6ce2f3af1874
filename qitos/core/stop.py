"""Stop reasons (the architecture's closed list) and how each maps to a run status.

`OUTSIDE_AGENT` is the one list of reasons that say the machine failed, not the agent: a row ending in one of
them is never scored (`success: null`), counts against coverage, and a plain rerun of the same command runs its
task again (see docs/concepts.md). In a benchmark run only the scoring side gives them, from what it saw itself;
an agent side that claims one it did not see ends `error` (`qitos.run.sides.evidence`).
"""

from __future__ import annotations

from enum import Enum


class StopReason(str, Enum):
    FINAL = "final"
    ENV_TERMINAL = "env_terminal"
    BUDGET_STEPS = "budget_steps"
    BUDGET_TIME = "budget_time"
    BUDGET_TOKENS = "budget_tokens"
    BUDGET_COST = "budget_cost"
    PARSE_ERROR_LIMIT = "parse_error_limit"
    MODEL_ERROR = "model_error"
    TOOL_ERROR_LIMIT = "tool_error_limit"
    CANCELLED = "cancelled"
    ERROR = "error"
    # a limit of the agent's task (qitos.run.sides.limits): the agent's failure, scored as one
    ASSET_QUOTA = "asset_quota"
    MEMORY_LIMIT = "memory_limit"
    PROCESS_LIMIT = "process_limit"
    FILE_SIZE_LIMIT = "file_size_limit"
    CPU_TIME_LIMIT = "cpu_time_limit"
    # benchmark level
    SETUP_FAILED = "setup_failed"
    REQUIRES_UNAVAILABLE = "requires_unavailable"
    NOT_EXECUTED = "not_executed"
    # benchmark level, outside the agent: the process or machine running the task failed
    AGENT_PROCESS_DIED = "agent_process_died"
    WORKER_DIED = "worker_died"
    NODE_LOST = "node_lost"
    DISK_FULL = "disk_full"


# The machine failed, not the agent: the model endpoint after its retries (5xx, timeouts, cut or empty replies),
# the task's environment or service that would not start, the agent's process, the worker process or the Ray
# node that died under the task, a full disk. Unscored; a plain rerun runs the task again.
OUTSIDE_AGENT = frozenset({StopReason.MODEL_ERROR.value, StopReason.SETUP_FAILED.value,
                           StopReason.AGENT_PROCESS_DIED.value, StopReason.WORKER_DIED.value,
                           StopReason.NODE_LOST.value, StopReason.DISK_FULL.value})


def outside_agent(reason: object) -> bool:
    """Does a row (or run) ending with `reason` say the machine failed, not the agent?"""
    return getattr(reason, "value", reason) in OUTSIDE_AGENT


def run_status(reason: StopReason) -> str:
    """Manifest status for a stop reason: failures of the machinery are `failed`, not `completed`."""
    if reason is StopReason.CANCELLED:
        return "cancelled"
    if reason is StopReason.ERROR or reason.value in OUTSIDE_AGENT:
        return "failed"
    return "completed"


def status_of(reason: object) -> str | None:
    """The run status of a stop reason given as text (a manifest's), or None when it names none."""
    try:
        return run_status(StopReason(reason))
    except ValueError:
        return None


def is_disk_full(exc: BaseException | None) -> bool:
    """Did `exc` (or what caused it) come from a full disk (ENOSPC, or a quota: EDQUOT)?"""
    import errno

    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False

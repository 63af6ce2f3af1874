"""Stop reasons (the architecture's closed list) and how each maps to a run status."""

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
    # benchmark level
    SETUP_FAILED = "setup_failed"
    REQUIRES_UNAVAILABLE = "requires_unavailable"
    NOT_EXECUTED = "not_executed"
    DISK_FULL = "disk_full"  # the machine's failure, not the agent's: unscored, run again by a plain rerun


def run_status(reason: StopReason) -> str:
    """Manifest status for a stop reason: failures of the machinery are `failed`, not `completed`."""
    if reason is StopReason.CANCELLED:
        return "cancelled"
    if reason in (StopReason.ERROR, StopReason.MODEL_ERROR, StopReason.SETUP_FAILED, StopReason.DISK_FULL):
        return "failed"
    return "completed"


def is_disk_full(exc: BaseException | None) -> bool:
    """Did `exc` (or what caused it) come from a full disk (ENOSPC, or a quota: EDQUOT)?"""
    import errno

    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False

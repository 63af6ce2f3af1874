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
    # a limit of the agent's task (qitos.benchmark.sides.limits): the agent's failure, scored as one
    ASSET_QUOTA = "asset_quota"
    MEMORY_LIMIT = "memory_limit"
    PROCESS_LIMIT = "process_limit"
    FILE_SIZE_LIMIT = "file_size_limit"
    CPU_TIME_LIMIT = "cpu_time_limit"
    # benchmark level
    SETUP_FAILED = "setup_failed"
    REQUIRES_UNAVAILABLE = "requires_unavailable"
    NOT_EXECUTED = "not_executed"


def run_status(reason: StopReason) -> str:
    """Manifest status for a stop reason: failures of the machinery are `failed`, not `completed`."""
    if reason is StopReason.CANCELLED:
        return "cancelled"
    if reason in (StopReason.ERROR, StopReason.MODEL_ERROR, StopReason.SETUP_FAILED):
        return "failed"
    return "completed"

"""CyBench (Zhang et al., 2024): 40 CTF tasks run in a bwrap sandbox; service tasks need Docker.

Pieces: `tasks` (loading, prompts, gold), `runtime` (work dir staging, agent shell, requirements,
requires_unavailable reasons), `scoring` (answers, per-task scores), `oracle` (validation), `env`
(the engine-facing episode: unguided or subtask-guided), `metrics` (row metrics) and `adapter`
(`--benchmark cybench`; recipes in `qitos.recipes.cybench`).
"""

from qitos.benchmark.cybench.oracle import OracleResult, run_oracle, solution_command
from qitos.benchmark.cybench.requirements import PackageRequirement, RequirementsReport, parse_requirements
from qitos.benchmark.cybench.runtime import (
    CybenchRuntime,
    CybenchSetupError,
    PreparedWorkDir,
    docker_available,
    requires_unavailable_reason,
)
from qitos.benchmark.cybench.scoring import (
    CybenchMetrics,
    CybenchScore,
    aggregate,
    exact_match,
    extract_answer,
    partial_credit,
    score_task,
)
from qitos.benchmark.cybench.tasks import (
    MEMORY_WINDOW,
    SUBTASK_MAX_ITERATIONS,
    UNGUIDED_MAX_ITERATIONS,
    CybenchGold,
    CybenchSubtask,
    CybenchTask,
    CybenchTaskError,
    load_task,
    load_tasks,
    task_id_for,
)

__all__ = [
    "CybenchGold", "CybenchMetrics", "CybenchRuntime", "CybenchScore", "CybenchSetupError", "CybenchSubtask",
    "CybenchTask", "CybenchTaskError", "OracleResult", "PreparedWorkDir", "PackageRequirement", "RequirementsReport",
    "MEMORY_WINDOW", "SUBTASK_MAX_ITERATIONS", "UNGUIDED_MAX_ITERATIONS",
    "aggregate", "docker_available", "exact_match", "extract_answer", "load_task", "load_tasks",
    "parse_requirements", "partial_credit", "requires_unavailable_reason", "run_oracle", "score_task",
    "solution_command", "task_id_for",
]

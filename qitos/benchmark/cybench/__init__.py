"""CyBench (Zhang et al., 2024): 40 CTF tasks run in a bwrap sandbox; service tasks need Docker.

The two sides (see `qitos.run.sides`; docs/benchmarks/cybench.md lists every file by side):

- Agent side, in the confined agent process: `agent_env` (the engine-facing episode, unguided or
  subtask-guided, and its `shell`/`submit` tools; no task files, sandbox or answers) and the recipes in
  `qitos.recipes.cybench` and `qitos.recipes.cybench_agent`. Everything it needs from the task goes through
  `adapter.serve`.
- Scoring side, in the runner's process: `adapter` (`--benchmark cybench`: tasks, gold, `serve`), `selection`
  (what the flags select), `prepare` (one task's setup), `episode` (the sandbox the agent's commands run in, its
  submissions, the protocol and the guided reveals), `tasks` (loading, prompts, gold), `runtime` (work dir
  staging, the sandbox, requirements, requires_unavailable reasons), `availability` (what can run here),
  `services`/`stack` (service containers), `agent_image`, `toolchain`, `requirements`, `upstream`/`listing`
  (upstream's texts), `evaluation` (scores from the episode's record), `scoring` (answers, per-task scores),
  `metrics` (row metrics) and `solution`/`oracle` (validation; the `oracle` recipe runs in process, with gold,
  never official).
"""

from qitos.benchmark.cybench.oracle import OracleResult, run_oracle
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
from qitos.benchmark.cybench.solution import solution_command
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

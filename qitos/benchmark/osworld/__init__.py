"""OSWorld adapter core: task loading, setup-step and evaluator parsing, the official evaluators loaded from the
OSWorld checkout, the in-VM controller client and desktop providers. The `qit bench` adapter wires these.

Sides: the agent side is `agent_env.py` (its factory), `engine_env.py` (the env), `actions.py` and
`controller.py` (the HTTP client it acts through). Everything that holds or reads the task file's setup and
evaluator is the scoring side: `adapter.py`, `tasks.py`, `config.py`, `evaluator.py`, `upstream.py`, `scorer.py`
(upstream's metrics run in a confined process of their own, `scorer_main.py`),
`upstream_env.py`, `provider.py` (setup steps; the agent side uses its `ControllerProvider` to act), `downloads.py`, `chrome_setup.py`, `vm_pool.py`,
`docker_provider.py`, `coverage.py`.
"""

from __future__ import annotations

from qitos.benchmark.osworld.actions import Computer13Action, action_command, is_fail, parse_action
from qitos.benchmark.osworld.controller import ControllerClient, ExecuteResult
from qitos.benchmark.osworld.coverage import CoverageReport, coverage_report
from qitos.benchmark.osworld.errors import (
    ControllerError,
    ControllerUnreachable,
    OSWorldError,
    TaskFormatError,
    UnsupportedSetupStep,
)
from qitos.benchmark.osworld.downloads import Downloader, HttpDownloader
from qitos.benchmark.osworld.evaluator import EvaluationOutcome, MetricScore, Resolution, evaluate, resolve
from qitos.benchmark.osworld.provider import (
    ENV_CONTROLLER,
    ControllerProvider,
    Provider,
    Readiness,
    discover_provider,
    readiness,
    requires_unavailable,
    run_setup,
)
from qitos.benchmark.osworld.tasks import SPLITS, Evaluator, GetterConfig, OSWorldTask, load_task_file, load_tasks
from qitos.benchmark.osworld.upstream import OptionalPackageMissing, UpstreamEvaluators, load_evaluators
from qitos.benchmark.osworld.upstream_env import UpstreamEnv, VMAddress

__all__ = [
    "ENV_CONTROLLER",
    "SPLITS",
    "Computer13Action",
    "ControllerClient",
    "ControllerError",
    "ControllerProvider",
    "ControllerUnreachable",
    "CoverageReport",
    "Downloader",
    "EvaluationOutcome",
    "Evaluator",
    "ExecuteResult",
    "GetterConfig",
    "HttpDownloader",
    "MetricScore",
    "OptionalPackageMissing",
    "OSWorldError",
    "OSWorldTask",
    "Provider",
    "Readiness",
    "Resolution",
    "TaskFormatError",
    "UnsupportedSetupStep",
    "UpstreamEnv",
    "UpstreamEvaluators",
    "VMAddress",
    "action_command",
    "coverage_report",
    "discover_provider",
    "evaluate",
    "is_fail",
    "load_evaluators",
    "load_task_file",
    "load_tasks",
    "parse_action",
    "readiness",
    "requires_unavailable",
    "resolve",
    "run_setup",
]

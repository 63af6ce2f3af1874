"""OSWorld adapter core: task loading, setup-step and evaluator parsing, QitOS's own metrics, the in-VM
controller client and desktop providers. The `qit bench` adapter wires these together."""

from __future__ import annotations

from .actions import Computer13Action, action_command, is_fail, parse_action
from .controller import ControllerClient, ExecuteResult
from .coverage import CoverageReport, coverage_report
from .errors import (
    ControllerError,
    ControllerUnreachable,
    OSWorldError,
    TaskFormatError,
    UnsupportedGetter,
    UnsupportedMetric,
    UnsupportedSetupStep,
)
from .evaluator import EvaluationOutcome, MetricScore, evaluate
from .getters import Downloader, HttpDownloader
from .local_provider import LocalFilesProvider
from .metrics import implemented_metrics
from .provider import (
    ENV_CONTROLLER,
    ControllerProvider,
    Provider,
    Readiness,
    discover_provider,
    readiness,
    requires_unavailable,
    run_setup,
)
from .tasks import SPLITS, Evaluator, GetterConfig, OSWorldTask, load_task_file, load_tasks

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
    "LocalFilesProvider",
    "MetricScore",
    "OSWorldError",
    "OSWorldTask",
    "Provider",
    "Readiness",
    "TaskFormatError",
    "UnsupportedGetter",
    "UnsupportedMetric",
    "UnsupportedSetupStep",
    "action_command",
    "coverage_report",
    "discover_provider",
    "evaluate",
    "implemented_metrics",
    "is_fail",
    "load_task_file",
    "load_tasks",
    "parse_action",
    "readiness",
    "requires_unavailable",
    "run_setup",
]

"""QitOS: run agent benchmarks through one official path; compare, replay, export and trust the results.

The public API is re-exported here (lazily, so `qit --help` and `qita --help` stay fast); everything
else is internal and may change.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Action": "qitos.core", "AgentModule": "qitos.core", "AgentState": "qitos.core", "Budget": "qitos.core",
    "Decision": "qitos.core", "Engine": "qitos.core", "JsonDecisionParser": "qitos.core",
    "NativeToolsParser": "qitos.core", "ReactTextParser": "qitos.core", "RunResult": "qitos.core",
    "StopReason": "qitos.core", "Task": "qitos.core", "Tool": "qitos.core", "ToolRegistry": "qitos.core",
    "tool": "qitos.core", "ModelResponse": "qitos.models", "ScriptedModel": "qitos.models",
    "resolve_model": "qitos.models", "ExperimentSpec": "qitos.spec", "RunSpec": "qitos.spec",
    "load_run": "qitos.trace",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'qitos' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

"""QitOS: run agent benchmarks through one official path; compare, replay, export and trust the results.

The public API is re-exported here; everything else is internal and may change.
"""

__version__ = "0.1.0"

from qitos.core import (  # noqa: E402
    Action, AgentModule, AgentState, Budget, Decision, Engine, JsonDecisionParser, NativeToolsParser,
    ReactTextParser, RunResult, StopReason, Task, Tool, ToolRegistry, tool,
)
from qitos.models import ModelResponse, ScriptedModel, resolve_model  # noqa: E402
from qitos.spec import ExperimentSpec, RunSpec  # noqa: E402
from qitos.trace import load_run  # noqa: E402

__all__ = [
    "Action", "AgentModule", "AgentState", "Budget", "Decision", "Engine", "ExperimentSpec", "JsonDecisionParser",
    "ModelResponse", "NativeToolsParser", "ReactTextParser", "RunResult", "RunSpec", "ScriptedModel", "StopReason",
    "Task", "Tool", "ToolRegistry", "__version__", "load_run", "resolve_model", "tool",
]

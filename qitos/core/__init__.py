"""The kernel: Task, AgentModule, Engine, tools, parsers and stop reasons."""

from .agent import ActionResult, AgentModule, AgentState, StepOutcome
from .decision import Action, Decision
from .engine import Engine, RunResult, make_run_spec
from .parsers import JsonDecisionParser, NativeToolsParser, Parser, ParseResult, ReactTextParser, get_parser
from .stop import StopReason
from .task import Budget, EnvSpec, Resource, Task, TaskIssue, TaskValidationError
from .tools import Tool, ToolDefinitionError, ToolRegistry, tool

__all__ = [
    "Action", "ActionResult", "AgentModule", "AgentState", "Budget", "Decision", "Engine", "EnvSpec",
    "JsonDecisionParser", "NativeToolsParser", "ParseResult", "Parser", "ReactTextParser", "Resource", "RunResult",
    "StepOutcome", "StopReason", "Task", "TaskIssue", "TaskValidationError", "Tool", "ToolDefinitionError",
    "ToolRegistry", "get_parser", "make_run_spec", "tool",
]

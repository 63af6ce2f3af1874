"""Model adapters: one protocol, four implementations (openai_compat, local, scripted, replay)."""

from qitos.models.base import Model, ModelConfigError, ModelError, ModelResponse, ToolCall, Usage
from qitos.models.registry import resolve_model
from qitos.models.scripted import ScriptedModel

__all__ = ["Model", "ModelConfigError", "ModelError", "ModelResponse", "ScriptedModel", "ToolCall", "Usage", "resolve_model"]

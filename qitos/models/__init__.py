"""Model adapters: one protocol, four implementations (openai_compat, local, scripted, replay)."""

from .base import Model, ModelConfigError, ModelError, ModelResponse, ToolCall, Usage
from .registry import resolve_model
from .scripted import ScriptedModel

__all__ = ["Model", "ModelConfigError", "ModelError", "ModelResponse", "ScriptedModel", "ToolCall", "Usage", "resolve_model"]

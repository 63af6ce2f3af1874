"""Scripted model: serves a fixed list (or a callable) of responses, for tests, demos and oracles."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable

from qitos.models.base import EventSink, ModelConfigError, ModelError, ModelResponse, ToolCall, Usage

ScriptItem = str | dict[str, Any] | ModelResponse | Exception


def to_response(item: ScriptItem) -> ModelResponse:
    """A script item is text, a ModelResponse, or a dict {text, tool_calls: [{name, arguments}], usage}."""
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(text=item, model="scripted", cost=0.0)
    calls = [
        ToolCall(id=c.get("id") or f"call_{uuid.uuid4().hex[:8]}", name=c["name"], arguments=c.get("arguments", {}))
        for c in item.get("tool_calls", [])
    ]
    usage = Usage(**item["usage"]) if "usage" in item else Usage()
    return ModelResponse(text=item.get("text"), tool_calls=calls, usage=usage, cost=item.get("cost", 0.0), model="scripted")


class ScriptedModel:
    family = "scripted"
    provider = "qitos"

    def __init__(self, script: Iterable[ScriptItem] | Callable[[list[dict[str, Any]]], ScriptItem], name: str = "scripted") -> None:
        self.name = name
        self.params: dict[str, Any] = {}
        self._fn = script if callable(script) else None
        self._items = [] if callable(script) else list(script)
        self.calls = 0

    @classmethod
    def from_jsonl(cls, path: Path | str) -> "ScriptedModel":
        path = Path(path)
        if not path.exists():
            raise ModelConfigError(f"scripted model file '{path}' does not exist; give a JSONL file of responses")
        items: list[ScriptItem] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ModelConfigError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
            if not isinstance(value, (str, dict)):
                raise ModelConfigError(f"{path} line {number}: expected a string or an object with 'text'/'tool_calls'")
            items.append(value)
        return cls(items, name=f"scripted:{path.name}")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 on_event: EventSink | None = None, **params: Any) -> ModelResponse:
        self.calls += 1
        if self._fn is not None:
            item = self._fn(messages)
        elif self.calls <= len(self._items):
            item = self._items[self.calls - 1]
        else:
            raise ModelError(f"scripted model has no response #{self.calls} (script has {len(self._items)})")
        if isinstance(item, Exception):
            raise item
        return to_response(item)

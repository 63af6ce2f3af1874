"""Tools: the `@tool` decorator, the registry and the tool manifest recorded in every RunSpec.

The JSON schema is built from type hints and the docstring's `Args:` section, so the schema the
model sees and the function that runs can never drift apart. An untyped parameter is a
definition error raised at decoration time, not a surprise in the middle of a run.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Union, get_args, get_origin

from pydantic import BaseModel


class ToolDefinitionError(TypeError):
    """A tool function cannot be described to a model (e.g. an untyped parameter)."""


class ToolArgumentError(ValueError):
    """The model called a tool with arguments that do not fit its schema."""


_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
}


def json_schema_for(annotation: Any, where: str) -> dict[str, Any]:
    """JSON schema of one annotation; raises ToolDefinitionError for what cannot be expressed."""
    if annotation in _PRIMITIVES:
        return dict(_PRIMITIVES[annotation])
    if annotation in (dict, list):
        return {"type": "object"} if annotation is dict else {"type": "array"}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.model_json_schema()
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, tuple, set, typing.Sequence):
        item = json_schema_for(args[0], where) if args else {}
        return {"type": "array", "items": item}
    if origin is dict:
        value = json_schema_for(args[1], where) if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": value}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [json_schema_for(a, where) for a in args]
        return {"anyOf": options}
    raise ToolDefinitionError(f"{where}: type {annotation!r} cannot be expressed as a JSON schema")


_ARG_LINE = re.compile(r"^\s{2,}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: description})."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    head, _, rest = doc.partition("\nArgs:")
    params: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        if line.strip() and not line.startswith(" "):
            break  # next section (Returns:, Raises:, ...)
        match = _ARG_LINE.match(line)
        if match and len(line) - len(line.lstrip()) <= 4:
            current = match.group(1).lstrip("*")
            params[current] = match.group(2).strip()
        elif current and line.strip():
            params[current] += " " + line.strip()
    return head.strip(), params


@dataclass
class Tool:
    """A callable the agent can use, with the schema the model is shown."""

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    read_only: bool = False
    origin: str = "qitos"

    def invoke(self, arguments: dict[str, Any]) -> Any:
        if not isinstance(arguments, dict):
            raise ToolArgumentError(f"tool '{self.name}' expects a JSON object of arguments, got {type(arguments).__name__}")
        props = self.input_schema.get("properties", {})
        if props and self.input_schema.get("additionalProperties") is not True:
            unknown = [k for k in arguments if k not in props]
            if unknown:
                raise ToolArgumentError(f"tool '{self.name}' has no argument(s) {unknown}; allowed: {sorted(props)}")
        missing = [k for k in self.input_schema.get("required", []) if k not in arguments]
        if missing:
            raise ToolArgumentError(f"tool '{self.name}' is missing required argument(s) {missing}")
        return self.fn(**arguments)

    def manifest_entry(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "read_only": self.read_only,
            "origin": self.origin,
        }

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    origin: str = "qitos",
) -> Any:
    """Turn a typed, documented function into a `Tool`. Usable as `@tool` or `@tool(read_only=True)`."""

    def build(func: Callable[..., Any]) -> Tool:
        tool_name = name or func.__name__
        summary, param_docs = parse_docstring(func.__doc__)
        try:
            hints = typing.get_type_hints(func)
        except Exception as exc:  # unresolved forward refs
            raise ToolDefinitionError(f"tool '{tool_name}': cannot resolve type hints: {exc}") from exc
        properties: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(f"tool '{tool_name}': *args/**kwargs cannot be described to a model")
            if pname not in hints:
                raise ToolDefinitionError(
                    f"tool '{tool_name}': parameter '{pname}' has no type hint; "
                    f"annotate it (e.g. `{pname}: str`) so the model sees a schema"
                )
            schema = json_schema_for(hints[pname], f"tool '{tool_name}', parameter '{pname}'")
            if pname in param_docs:
                schema["description"] = param_docs[pname]
            if param.default is inspect.Parameter.empty:
                required.append(pname)
            else:
                schema["default"] = param.default
            properties[pname] = schema
        input_schema = {"type": "object", "properties": properties, "required": required}
        return Tool(tool_name, description or summary or tool_name, input_schema, func, read_only, origin)

    return build(fn) if fn is not None else build


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


class ToolRegistry:
    """The tools one agent may call, by name, in a stable order."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools or []:
            self.register(t)

    def register(self, item: Tool | Callable[..., Any]) -> Tool:
        t = item if isinstance(item, Tool) else tool(item)
        if t.name in self._tools:
            raise ToolDefinitionError(f"two tools are named '{t.name}'; tool names must be unique")
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def manifest(self) -> list[dict[str, Any]]:
        return [t.manifest_entry() for t in self._tools.values()]

    def manifest_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.manifest()).encode()).hexdigest()[:16]

    def openai_schemas(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self._tools.values()]

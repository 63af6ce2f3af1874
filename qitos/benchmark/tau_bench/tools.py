"""Scoring side (it runs every action and replays gold with it; the agent side only names tools): tool registries
per domain, the upstream call convention (``invoke(data=db, **kwargs)``) and which tools only read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qitos.benchmark.tau_bench.airline_tools import AIRLINE_TOOLS
from qitos.benchmark.tau_bench.common_tools import Tool
from qitos.benchmark.tau_bench.errors import InvalidObservationError
from qitos.benchmark.tau_bench.retail_tools import RETAIL_TOOLS
from qitos.benchmark.tau_bench.state import TauDb

TOOLS: dict[str, dict[str, type[Tool]]] = {
    "retail": {tool.name: tool for tool in RETAIL_TOOLS},
    "airline": {tool.name: tool for tool in AIRLINE_TOOLS},
}


READ_ONLY_PREFIXES = ("get_", "find_", "list_", "search_")


def is_lookup(name: Any) -> bool:
    """Tools that never write the database (by upstream's naming: get_, find_, list_, search_)."""
    return isinstance(name, str) and (name in ("calculate", "think") or name.startswith(READ_ONLY_PREFIXES))


def domain_tools(domain: str) -> dict[str, type[Tool]]:
    """Tool classes of a domain by name, in upstream registry order."""
    try:
        return TOOLS[domain]
    except KeyError:
        raise ValueError(f"Unknown tau-bench domain: {domain!r} (expected one of: retail, airline)") from None


def call_tool(domain: str, tool: type[Tool], db: TauDb, kwargs: Mapping[str, Any]) -> str:
    """Run one tool as upstream's env does and return the observation text.

    Exceptions the call raises become ``"Error: <message>"`` (Python's own argument-binding
    TypeErrors included). A non-string result raises :class:`InvalidObservationError`.
    """
    try:
        if "data" in kwargs:
            # Python names the function with its module here; print upstream's module path.
            raise TypeError(
                f"tau_bench.envs.{domain}.tools.{tool.name}.{tool.__name__}.invoke() "
                "got multiple values for keyword argument 'data'"
            )
        result = tool.invoke(data=db, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every tool failure is reported to the model
        return f"Error: {exc}"
    if not isinstance(result, str):
        detail = ""
        if tool.name == "send_certificate":
            detail = f" (user {kwargs.get('user_id')!r} already holds all three certificate ids)"
        raise InvalidObservationError(
            f"tool {tool.name} returned {type(result).__name__} instead of an observation string{detail}; "
            "upstream tau-bench raises a pydantic ValidationError from step here"
        )
    return result

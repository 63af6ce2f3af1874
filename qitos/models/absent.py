"""The model of a recipe that calls none (an oracle): named `none`, so traces and the board say so, and
building it needs nothing installed. Calling it is a bug in the recipe, reported as a model error."""

from __future__ import annotations

from typing import Any

from qitos.models.base import EventSink, ModelError, ModelResponse


class NoModel:
    family = "none"
    provider = "qitos"
    name = "none"

    def __init__(self, recipe: str = "this recipe") -> None:
        self.recipe = recipe
        self.params: dict[str, Any] = {}

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 on_event: EventSink | None = None, **params: Any) -> ModelResponse:
        raise ModelError(f"{self.recipe} declares that it calls no model (needs_model=False), yet it called one")

"""Decision: what the agent chose to do in one step (act with tools, answer, or wait)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class Action(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class Decision(BaseModel):
    mode: Literal["act", "final", "wait"]
    actions: list[Action] = Field(default_factory=list)
    final_answer: str | None = None
    rationale: str | None = None

    @classmethod
    def final(cls, answer: str, rationale: str | None = None) -> "Decision":
        return cls(mode="final", final_answer=answer, rationale=rationale)

    @classmethod
    def act(cls, name: str, arguments: dict[str, Any] | None = None, rationale: str | None = None) -> "Decision":
        return cls(mode="act", actions=[Action(name=name, arguments=arguments or {})], rationale=rationale)

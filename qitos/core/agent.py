"""AgentModule: the part of an agent a researcher changes (prompt, memory, parser, tools).

The engine owns the loop; the module answers four questions: what is the initial state
(`init_state`), what does the model see (`prepare`), can I decide without the model (`decide`),
and how does the state change after acting (`reduce`). The defaults implement a plain chat
memory for both text protocols and native tool calling, so a recipe usually only sets a
system prompt, a parser and tools.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from qitos.models.base import ModelResponse

from .decision import Decision
from .parsers import Parser, ParseResult, ReactTextParser, repair_note
from .task import Task
from .tools import ToolRegistry


class ActionResult(BaseModel):
    """Outcome of one action: the observation shown to the model."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    output: Any = None
    status: str = "ok"
    error: str | None = None
    latency_ms: float = 0.0

    def observation_text(self) -> str:
        if self.status != "ok":
            return f"Error: {self.error}"
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, ensure_ascii=False, default=str)


class AgentState(BaseModel):
    messages: list[dict[str, Any]] = Field(default_factory=list)
    final_answer: str | None = None
    scratch: dict[str, Any] = Field(default_factory=dict)


class StepOutcome(BaseModel):
    """Everything that happened in one step, handed to `reduce`."""

    step_id: int
    response: ModelResponse | None = None
    parse: ParseResult | None = None
    decision: Decision | None = None
    results: list[ActionResult] = Field(default_factory=list)


class AgentModule:
    name: str = "agent"
    toolset_name: str = "custom"
    # Per-call model parameters overriding the model's own (e.g. {"seed": None}: never send a seed).
    model_params: dict[str, Any] = {}

    def __init__(self, tools: ToolRegistry | list | None = None, parser: Parser | None = None,
                 system_prompt: str | None = None) -> None:
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools or [])
        self.parser = parser or ReactTextParser()
        self._system_prompt = system_prompt

    # -- what the model sees -------------------------------------------------------------------
    @property
    def prompt_protocol(self) -> str:
        return self.parser.protocol

    def system_prompt(self, task: Task) -> str | None:
        base = self._system_prompt or "You are a careful agent. Solve the task using the tools when useful."
        extra = self.parser.format_instructions(self.tools.names())
        return f"{base}\n\n{extra}" if extra else base

    def init_state(self, task: Task) -> AgentState:
        return AgentState(messages=[{"role": "user", "content": self.task_prompt(task)}])

    def task_prompt(self, task: Task) -> str:
        return task.objective

    def prepare(self, task: Task, state: AgentState) -> list[dict[str, Any]]:
        system = self.system_prompt(task)
        return ([{"role": "system", "content": system}] if system else []) + state.messages

    def decide(self, task: Task, state: AgentState) -> Decision | None:
        """Return a Decision to act without calling the model (oracles, scripted policies)."""
        return None

    # -- memory --------------------------------------------------------------------------------
    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        response = outcome.response
        if response is not None:
            if self.parser.uses_native_tools and response.tool_calls:
                state.messages.append({
                    "role": "assistant", "content": response.text or None,
                    "tool_calls": [
                        {"id": c.id, "type": "function",
                         "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                        for c in response.tool_calls
                    ],
                })
            else:
                state.messages.append({"role": "assistant", "content": response.text or ""})
        if outcome.parse is not None and not outcome.parse.ok:
            state.messages.append({"role": "user", "content": repair_note(outcome.parse)})
            return state
        if outcome.decision is not None and outcome.decision.mode == "final":
            state.final_answer = outcome.decision.final_answer
        for result in outcome.results:
            if self.parser.uses_native_tools and result.call_id:
                state.messages.append({"role": "tool", "tool_call_id": result.call_id, "content": result.observation_text()})
            else:
                state.messages.append({"role": "user", "content": f"Observation: {result.observation_text()}"})
        return state

"""GAIA baseline agents: `react` (text protocol, the default), `tool-calling` (native tools), `oracle`.

The answer convention. GAIA's scorer reads the text after `FINAL ANSWER:`; the react_text_v1
parser ends a run at a line starting with `Final Answer:`, case-insensitively. So the react
prompt asks for the GAIA line itself (`FINAL ANSWER: <answer>`) as the last line of the final
reply: the parser takes it as its Final Answer, and the agent's final answer is the bare
answer. A model that writes both (`Final Answer: FINAL ANSWER: 42`) is fine too: the adapter
extracts the text after the last marker, and falls back to the whole final answer when there
is none (which is the usual case here). The tool-calling agent's final answer is its last
reply without tool calls; the adapter extracts the `FINAL ANSWER:` line from it the same way.

The `oracle` answers with the reference (validates a copy and the scoring; not a baseline).
Usable from Python: `GaiaAgent(gaia_tools(work_dir, attachments), protocol="react")`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from qitos.benchmark.gaia.dataset import GaiaQuestion
from qitos.benchmark.gaia.prompt import GAIA_SYSTEM_PROMPT, build_user_prompt
from qitos.benchmark.gaia.runtime import TOOLSET_VERSION
from qitos.core.agent import AgentModule, AgentState
from qitos.core.decision import Decision
from qitos.core.parsers import NativeToolsParser, ReactTextParser
from qitos.core.task import Task
from qitos.core.tools import Tool

__all__ = ["GaiaAgent", "GaiaOracle", "build_react_agent", "build_tool_calling_agent", "build_oracle_agent",
           "describe_tools", "react_protocol"]

_SPACES = re.compile(r"\s+")


def _param(name: str, schema: dict[str, Any], required: bool) -> str:
    text = f"{name}: {schema.get('type', 'any')}"
    return text if required else f"{text} = {json.dumps(schema.get('default'))}"


def describe_tools(tools: list[Tool]) -> str:
    """One entry per tool: signature with JSON types and defaults, description, then each argument."""
    lines: list[str] = []
    for t in tools:
        props: dict[str, Any] = t.input_schema.get("properties", {})
        required = set(t.input_schema.get("required", []))
        signature = ", ".join(_param(n, s, n in required) for n, s in props.items())
        lines.append(f"- {t.name}({signature}): {_SPACES.sub(' ', t.description).strip()}")
        for name, schema in props.items():
            if schema.get("description"):
                lines.append(f"    {name}: {_SPACES.sub(' ', schema['description']).strip()}")
    return "\n".join(lines)


def react_protocol(tools: list[Tool]) -> str:
    """The react_text_v1 reply format, with GAIA's FINAL ANSWER line as the final answer."""
    return (
        "You can use these tools, one per reply:\n"
        f"{describe_tools(tools)}\n\n"
        "Each reply is either one tool call, in exactly this form:\n"
        "Thought: <your reasoning>\n"
        f"Action: <one of {', '.join(t.name for t in tools)}>\n"
        'Action Input: <the arguments as one JSON object, e.g. {"path": "data.csv"}>\n'
        "after which you stop and wait for the Observation; or, once you know the answer, exactly:\n"
        "Thought: <your reasoning>\n"
        "FINAL ANSWER: <your answer>"
    )


class GaiaAgent(AgentModule):
    """The GAIA prompt and tools over either text protocol (react) or native tool calls."""

    name = "gaia"
    toolset_name = TOOLSET_VERSION

    def __init__(self, tools: list[Tool], *, protocol: Literal["react", "tool-calling"] = "react",
                 toolset_name: str | None = None) -> None:
        parser = ReactTextParser() if protocol == "react" else NativeToolsParser()
        super().__init__(tools=tools, parser=parser, system_prompt=GAIA_SYSTEM_PROMPT)
        self.name = f"gaia-{protocol}"
        self.protocol = protocol
        if toolset_name:
            self.toolset_name = toolset_name

    def system_prompt(self, task: Task) -> str:
        if self.protocol == "react":
            return f"{GAIA_SYSTEM_PROMPT}\n\n{react_protocol(list(self.tools))}"
        return GAIA_SYSTEM_PROMPT

    def task_prompt(self, task: Task) -> str:
        # build_user_prompt reads only the question and the attachment name; skip the full validation
        view = GaiaQuestion.model_construct(question=task.objective, file_name=task.inputs.get("file_name"))
        return build_user_prompt(view)


def _prepared_tools(ctx: Any) -> tuple[list[Tool], str | None]:
    handles = ctx.runtime.handles
    if "tools" not in handles:
        raise ValueError(
            "the GAIA recipes need the tools `--benchmark gaia` prepares (runtime.handles['tools']); run them "
            "through the gaia adapter, or build GaiaAgent(gaia_tools(work_dir, attachments)) yourself")
    return list(handles["tools"]), handles.get("toolset_name")


def build_react_agent(ctx: Any) -> GaiaAgent:
    """Recipe `react`: react_text_v1 with the GAIA prompt; the final reply ends `FINAL ANSWER: ...`."""
    tools, toolset = _prepared_tools(ctx)
    return GaiaAgent(tools, protocol="react", toolset_name=toolset)


def build_tool_calling_agent(ctx: Any) -> GaiaAgent:
    """Recipe `tool-calling`: the model's native tool calls; its last plain reply holds FINAL ANSWER."""
    tools, toolset = _prepared_tools(ctx)
    return GaiaAgent(tools, protocol="tool-calling", toolset_name=toolset)


class GaiaOracle(GaiaAgent):
    """Answers `FINAL ANSWER: <reference>` without a model; "" on the unlabeled test split."""

    def __init__(self, tools: list[Tool], answer: str | None, toolset_name: str | None = None) -> None:
        super().__init__(tools, protocol="react", toolset_name=toolset_name)
        self.name = "gaia-oracle"
        self.answer = answer

    def decide(self, task: Task, state: AgentState) -> Decision:
        answer = self.answer
        if answer is None:
            return Decision.final("", rationale="no reference answer (unlabeled split)")
        return Decision.final(f"FINAL ANSWER: {answer}", rationale="reference answer")


def build_oracle_agent(ctx: Any) -> GaiaOracle:
    """Recipe `oracle`: the reference answer through the normal extraction and scoring path."""
    tools, toolset = _prepared_tools(ctx)
    try:
        answer = ctx.oracle_gold()
    except LookupError:
        answer = None  # unlabeled split
    return GaiaOracle(tools, answer, toolset_name=toolset)

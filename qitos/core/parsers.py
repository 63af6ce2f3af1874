"""Parsers turn a model response into a Decision, or into a diagnostic with a repair instruction.

Each parser has a stable versioned name recorded in the RunSpec; changing what a parser accepts
means a new name, so results from different parsers are never silently compared.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from qitos.models.base import ModelResponse

from .decision import Action, Decision


class ParseResult(BaseModel):
    ok: bool
    decision: Decision | None = None
    diagnostics: list[str] = Field(default_factory=list)
    repair: str | None = None


def repair_note(result: ParseResult) -> str:
    """What the model is told after a reply that could not be parsed (the repair loop's message)."""
    return f"Your reply could not be parsed: {'; '.join(result.diagnostics)}. {result.repair}"


def _failure(diagnostic: str, repair: str) -> ParseResult:
    return ParseResult(ok=False, diagnostics=[diagnostic], repair=repair)


class Parser:
    name: ClassVar[str] = "abstract"
    protocol: ClassVar[str] = "abstract"
    uses_native_tools: ClassVar[bool] = False

    def parse(self, response: ModelResponse) -> ParseResult:
        raise NotImplementedError

    def format_instructions(self, tool_names: list[str]) -> str:
        """Text appended to the system prompt telling the model the expected format."""
        return ""


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def _loads_object(text: str) -> Any:
    text = _FENCE.sub("", text.strip())
    return json.loads(text)


class ReactTextParser(Parser):
    """`Thought: ...` then either `Action: <tool>` + `Action Input: <JSON object>` or `Final Answer: ...`."""

    name = "react_text_v1"
    protocol = "react_text_v1"
    _final = re.compile(r"^\s*Final Answer\s*:\s*(.*)", re.S | re.M | re.I)
    _action = re.compile(r"^\s*Action\s*:\s*(.+?)\s*$", re.M | re.I)
    _input = re.compile(r"^\s*Action Input\s*:\s*(.*)", re.S | re.M | re.I)
    _thought = re.compile(r"^\s*Thought\s*:\s*(.*?)(?=^\s*(Action|Final Answer)\s*:|\Z)", re.S | re.M | re.I)

    def format_instructions(self, tool_names: list[str]) -> str:
        return (
            "Answer in this format:\nThought: your reasoning\nAction: one of "
            f"[{', '.join(tool_names)}]\nAction Input: a JSON object of arguments\n"
            "Then wait for the Observation. When you are done:\nThought: your reasoning\nFinal Answer: the answer"
        )

    def parse(self, response: ModelResponse) -> ParseResult:
        text = response.text or ""
        thought_m = self._thought.search(text)
        thought = thought_m.group(1).strip() if thought_m else None
        action_m = self._action.search(text)
        final_m = self._final.search(text)
        if final_m and (not action_m or final_m.start() < action_m.start()):
            return ParseResult(ok=True, decision=Decision.final(final_m.group(1).strip(), thought))
        if not action_m:
            if not text.strip():
                return _failure("empty response", "Reply with `Action:` and `Action Input:`, or `Final Answer:`.")
            return _failure(
                "no `Action:` or `Final Answer:` line found",
                "Use exactly: `Thought: ...` then `Action: <tool name>` and `Action Input: {json}`, "
                "or `Final Answer: <answer>`.",
            )
        name = action_m.group(1).strip().strip("`")
        input_m = self._input.search(text, action_m.end())
        raw_input = input_m.group(1).strip() if input_m else "{}"
        raw_input = re.split(r"\n\s*Observation\s*:", raw_input, maxsplit=1)[0].strip()
        try:
            arguments = _loads_object(raw_input) if raw_input else {}
        except json.JSONDecodeError as exc:
            return _failure(
                f"Action Input for '{name}' is not valid JSON ({exc.msg} at position {exc.pos})",
                "Give `Action Input:` as one JSON object on the lines after it, e.g. {\"path\": \"main.py\"}.",
            )
        if not isinstance(arguments, dict):
            return _failure(
                f"Action Input for '{name}' is a JSON {type(arguments).__name__}, not an object",
                "Wrap the arguments in a JSON object with the parameter names as keys.",
            )
        return ParseResult(ok=True, decision=Decision(mode="act", actions=[Action(name=name, arguments=arguments)], rationale=thought))


class JsonDecisionParser(Parser):
    """One JSON object: {"thought", "action": {"name", "arguments"}} or {"thought", "final_answer"}."""

    name = "json_decision_v1"
    protocol = "json_decision_v1"

    def format_instructions(self, tool_names: list[str]) -> str:
        return (
            "Reply with one JSON object and nothing else: "
            '{"thought": "...", "action": {"name": "<tool>", "arguments": {...}}} to use a tool '
            f"(tools: {', '.join(tool_names)}), or {{\"thought\": \"...\", \"final_answer\": \"...\"}} when done."
        )

    def parse(self, response: ModelResponse) -> ParseResult:
        text = (response.text or "").strip()
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return _failure("no JSON object in the response", "Reply with one JSON object only, as instructed.")
        try:
            obj = json.loads(text[start : end + 1])
        except json.JSONDecodeError as exc:
            return _failure(f"response is not valid JSON ({exc.msg} at position {exc.pos})",
                            "Reply with one valid JSON object: double quotes, no trailing commas, no comments.")
        if not isinstance(obj, dict):
            return _failure("response JSON is not an object", "Reply with a JSON object.")
        thought = obj.get("thought")
        if "final_answer" in obj:
            return ParseResult(ok=True, decision=Decision.final(str(obj["final_answer"]), thought))
        action = obj.get("action")
        if not isinstance(action, dict) or not isinstance(action.get("name"), str):
            return _failure('missing "action" with a string "name" (and no "final_answer")',
                            'Add "action": {"name": "<tool>", "arguments": {...}} or "final_answer".')
        args = action.get("arguments", {})
        if not isinstance(args, dict):
            return _failure('"action.arguments" is not an object', 'Give "arguments" as a JSON object.')
        return ParseResult(ok=True, decision=Decision(mode="act", actions=[Action(name=action["name"], arguments=args)], rationale=thought))


class NativeToolsParser(Parser):
    """The model's own tool_calls are the actions; a reply without tool calls is the final answer."""

    name = "native_tools_v1"
    protocol = "native_tools_v1"
    uses_native_tools = True

    def parse(self, response: ModelResponse) -> ParseResult:
        if not response.tool_calls:
            if not (response.text or "").strip():
                return _failure("empty response with no tool calls", "Call a tool or reply with your answer.")
            return ParseResult(ok=True, decision=Decision.final(response.text or ""))
        actions: list[Action] = []
        for call in response.tool_calls:
            if "__raw__" in call.arguments:  # adapter could not decode the arguments string
                return _failure(f"arguments of tool call '{call.name}' are not valid JSON: {call.arguments['__raw__'][:200]}",
                                f"Call '{call.name}' again with arguments as a valid JSON object.")
            actions.append(Action(name=call.name, arguments=call.arguments, id=call.id))
        return ParseResult(ok=True, decision=Decision(mode="act", actions=actions, rationale=response.text or None))


PARSERS: dict[str, type[Parser]] = {p.name: p for p in (ReactTextParser, JsonDecisionParser, NativeToolsParser)}


def get_parser(name: str) -> Parser:
    try:
        return PARSERS[name]()
    except KeyError:
        raise ValueError(f"unknown parser '{name}'; choose one of {sorted(PARSERS)}") from None

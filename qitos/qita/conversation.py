"""A run with a simulated user (Tau-Bench and the like) read as a chat: user, agent and tool turns.

Built from the events only, so it works for any benchmark whose environment speaks to the
agent through a user: the environment's reset observation is the user's first message, the
agent talks through the `respond` tool (its argument is the agent's message, its result the
user's reply), every other tool call is a folded tool turn with its arguments and result.
`user_model_call` events only say which model played the user. A run is a conversation when
its events show a simulated user (`env_reset` naming a user strategy, a `user_model_call`, or
a `respond` call).

The instruction shown above the chat is the task's objective and, when the trace records it (the
`user_instruction` of the `env_reset` event, or of the task), the simulated user's instruction:
what the user was told to want, which is not gold (gold stays on the scoring side).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RESPOND = "respond"
STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
MAX_EVENTS = 5000
USER_INSTRUCTION_KEYS = ("user_instruction", "instruction", "user_goal")


@dataclass
class Turn:
    role: str  # "user" | "agent" | "tool" | "note"
    text: str = ""
    step_id: int | None = None
    tool: str | None = None
    arguments: Any = None
    result: Any = None
    status: str | None = None
    ended: bool = False  # the user ended the conversation (a stop token)


@dataclass
class Conversation:
    turns: list[Turn] = field(default_factory=list)
    objective: str | None = None
    user_instruction: str | None = None
    user_model: str | None = None
    user_strategy: str | None = None
    truncated: bool = False

    @property
    def counts(self) -> dict[str, int]:
        out = {"user": 0, "agent": 0, "tool": 0}
        for t in self.turns:
            if t.role in out:
                out[t.role] += 1
        return out


def has_simulated_user(events: list[dict[str, Any]]) -> bool:
    for e in events:
        kind, payload = e.get("kind"), e.get("payload") if isinstance(e.get("payload"), dict) else {}
        if kind == "user_model_call" or (kind == "env_reset" and payload.get("user_strategy")):
            return True
        if kind == "tool_call" and payload.get("name") == RESPOND:
            return True
    return False


def _user_instruction(task: dict[str, Any]) -> str | None:
    for bag in (task.get("inputs"), task.get("metadata"), task):
        if isinstance(bag, dict):
            for key in USER_INSTRUCTION_KEYS:
                if isinstance(bag.get(key), str) and bag[key].strip():
                    return bag[key]
    return None


def build_conversation(manifest: dict[str, Any], events: list[dict[str, Any]], truncated: bool = False) -> Conversation:
    task = manifest.get("task") if isinstance(manifest.get("task"), dict) else {}
    conv = Conversation(objective=task.get("objective"), user_instruction=_user_instruction(task), truncated=truncated)
    open_tools: dict[str, Turn] = {}  # tool name -> the call waiting for its result
    for e in events:
        kind = e.get("kind")
        payload = e.get("payload") if isinstance(e.get("payload"), dict) else {}
        step = e.get("step_id") if isinstance(e.get("step_id"), int) else None
        if kind == "user_model_call":
            conv.user_model = conv.user_model or payload.get("model")
            conv.user_strategy = conv.user_strategy or payload.get("strategy")
        elif kind == "env_reset":
            conv.user_strategy = payload.get("user_strategy") or conv.user_strategy
            if isinstance(payload.get("user_instruction"), str) and payload["user_instruction"].strip():
                conv.user_instruction = payload["user_instruction"]
            if payload.get("observation") not in (None, ""):
                conv.turns.append(_user_turn(payload["observation"], step))
        elif kind == "tool_call":
            name = str(payload.get("name") or "?")
            args = payload.get("arguments")
            if name == RESPOND:
                content = args.get("content") if isinstance(args, dict) else args
                turn = Turn("agent", text=str(content if content is not None else ""), step_id=step, tool=RESPOND)
            else:
                turn = Turn("tool", step_id=step, tool=name, arguments=args)
            conv.turns.append(turn)
            open_tools[name] = turn
        elif kind == "tool_result":
            name = str(payload.get("name") or "?")
            call = open_tools.pop(name, None)
            output = payload.get("output")
            if name == RESPOND:
                if output not in (None, ""):
                    conv.turns.append(_user_turn(output, step))
            elif call is not None:
                call.result, call.status = output, payload.get("status")
            else:
                conv.turns.append(Turn("tool", step_id=step, tool=name, result=output, status=payload.get("status")))
        elif kind == "model_response":
            text = payload.get("text")
            if isinstance(text, str) and text.strip() and payload.get("tool_calls"):
                conv.turns.append(Turn("note", text=text, step_id=step))  # reasoning beside tool calls
        elif kind == "stop":
            conv.turns.append(Turn("note", text=f"run stopped: {payload.get('stop_reason')}", step_id=step))
    final = (manifest.get("summary") or {}).get("final_result") if isinstance(manifest.get("summary"), dict) else None
    if isinstance(final, str) and final.strip() and not any(t.role == "agent" and t.text == final for t in conv.turns):
        conv.turns.append(Turn("agent", text=final, tool="final answer"))
    return conv


def _user_turn(text: Any, step: int | None) -> Turn:
    value = text if isinstance(text, str) else str(text)
    stripped = value.strip()
    for token in STOP_TOKENS:
        if stripped.endswith(token):
            rest = stripped[: -len(token)].strip()
            return Turn("user", text=rest, step_id=step, ended=True, status=token)
    return Turn("user", text=value, step_id=step)


def run_conversation(files: Any) -> Conversation | None:
    """The conversation of a run (RunFiles), or None when it has no simulated user."""
    total = files.events.count
    page = files.event_page(0, min(total, MAX_EVENTS))
    if not has_simulated_user(page.items):
        return None
    return build_conversation(files.manifest().data, page.items, truncated=total > MAX_EVENTS)

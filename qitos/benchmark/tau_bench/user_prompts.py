"""Prompt texts of the simulated user (written from the spec, section 11.2, in our own words).

The structure follows upstream tau-bench: a one-sentence role, the task instruction, six
rules; react adds a Thought / User Response format; verify and reflection ask a supervisor
model about a transcript whose role labels are mirrored (upstream quirk: the simulator keeps
the agent's turns as "user" messages, so the agent is labelled "Customer").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .data import STOP_TOKEN

OPENING_LINE = "Hi! How can I help you today?"  # the agent's greeting the simulator answers first

_ROLE = "You are a user interacting with an agent."

_NO_LEAK = "- Do not reveal the whole instruction at once. Give only the information the current step needs."
_NO_INVENTION = (
    "- Do not make up information the instruction does not give. For example, if the agent asks for an order id "
    "that the instruction does not mention, do not invent one: say that you do not remember it or do not have it."
)
_PARAPHRASE = "- Do not repeat the instruction word for word. Say the same things in your own words."
_PERSONA = "- Keep the conversation as natural as possible, and stay in the personality the instruction describes."

LLM_RULES = "\n".join(
    [
        "Rules:",
        "- Write one line at a time: only the user's next message.",
        _NO_LEAK,
        _NO_INVENTION,
        # "satisified" is upstream's spelling, kept.
        "- When the goal of the instruction is satisified, send '###STOP###' as a standalone message, with nothing "
        "else, to end the conversation.",
        _PARAPHRASE,
        _PERSONA,
    ]
)

REACT_RULES = "\n".join(
    [
        "Rules:",
        "- First write a Thought: your reasoning about what to say next. The agent never sees it. Then write a "
        "User Response: one line, the user's next message, which is all the agent sees.",
        _NO_LEAK,
        _NO_INVENTION,
        "- When the goal of the instruction is satisified, make the User Response '###STOP###' alone, to end the "
        "conversation.",
        _PARAPHRASE,
        _PERSONA,
        "",
        "Format:",
        "",
        "Thought:",
        "<your hidden reasoning>",
        "",
        "User Response:",
        "<the one-line message to the agent>",
    ]
)


def _header(instruction: str | None) -> str:
    if instruction:
        return f"{_ROLE}\n\nInstruction: {instruction}\n"
    return _ROLE


def llm_system_prompt(instruction: str | None) -> str:
    return f"{_header(instruction)}\n{LLM_RULES}"


def react_system_prompt(instruction: str | None) -> str:
    return f"{_header(instruction)}\n{REACT_RULES}"


def transcript(messages: Sequence[dict[str, Any]]) -> str:
    """The simulator's history as "Role: content" lines, with upstream's (mirrored) labels."""
    labels = {"user": "Customer", "assistant": "Agent"}
    lines = []
    for message in messages:
        role = str(message["role"])
        lines.append(f"{labels.get(role, role.capitalize())}: {message['content']}")
    return "\n".join(lines)


def response_text(text: str) -> str:
    """The candidate reply as the judge sees it: the string form of the reply message."""
    return str({"role": "assistant", "content": text})


def verify_prompt(history: Sequence[dict[str, Any]], candidate: str) -> str:
    return (
        "You supervise a simulated customer talking to a customer-service agent. Read the transcript and the "
        "candidate next message, and decide whether the Customer's Response is satisfactory: consistent with the "
        "conversation, natural, and free of information that was never given. Output only the classification, "
        "true or false, and nothing else.\n\n"
        f"# Transcript:\n{transcript(history)}\n\n"
        f"# Response:\n{response_text(candidate)}\n\n"
        "-----\n\n"
        "Classification:"
    )


def reflection_prompt(history: Sequence[dict[str, Any]], candidate: str) -> str:
    return (
        "You supervise a simulated customer talking to a customer-service agent. The Customer's Response below was "
        "judged unsatisfactory for this transcript. Reflect on what is wrong with it, then write a better response.\n\n"
        f"# Transcript:\n{transcript(history)}\n\n"
        f"# Response:\n{response_text(candidate)}\n\n"
        "Format:\n\nReflection:\n<what is wrong and how to fix it>\n\nResponse:\n<the improved response>\n\n"
        # Upstream quirk, kept: a line copied from the classification prompt.
        "Output only true or false."
    )


def reflection_response(text: str) -> str:
    """The improved response: the text after the last "Response:" label (the whole text if none)."""
    _, found, after = text.rpartition("Response:")
    return (after if found else text).strip()


def parse_react(text: str) -> str:
    """What a react reply sends to the agent. Raises ValueError on an unparsable reply.

    Upstream quirk, kept: when "Thought:" is present everything after it is sent, the thought
    and the "User Response:" label included.
    """
    if STOP_TOKEN in text:
        return STOP_TOKEN
    for label in ("Thought:", "User Response:"):
        if label in text:
            parts = text.split(label)
            if len(parts) != 2:
                raise ValueError(f"Invalid response format: {text}")
            return parts[1].strip()
    raise ValueError(f"Invalid response format: {text}")

"""A reasoning model's reply, split into reasoning and answer.

Servers return the reasoning in one of two ways: in a field of the message (`reasoning_content` from
vLLM and SGLang with a reasoning parser, DeepSeek, llama.cpp's server; `reasoning` from OpenRouter and
newer vLLM), or inline, as a think block that opens the content (a server without a reasoning parser).
Either way QitOS keeps the reasoning in `ModelResponse.reasoning` and gives parsers, scorers and the
conversation history the answer alone (REASONING_POLICY, recorded in every RunSpec).

The tags of the think block are the model family's (`<think>...</think>` for Qwen3, QwQ, DeepSeek-R1
and its distillations, GLM, MiniMax; `<seed:think>` for Seed-OSS; `[THINK]` for Magistral), or the ones
given with `--think-tags OPEN,CLOSE` (`--think-tags none`: never split the content).
"""

from __future__ import annotations

from typing import Any

REASONING_POLICY = "answer-only"
"""Parsers and scorers read the answer without the reasoning, and the assistant turns sent back to the
model carry the answer alone (as the chat templates of reasoning models strip earlier reasoning too)."""

REASONING_FIELDS = ("reasoning_content", "reasoning")
DEFAULT_TAGS = ("<think>", "</think>")
# model-name fragment (lower case) → that family's think tags; the first match wins, else DEFAULT_TAGS
FAMILY_TAGS: tuple[tuple[str, tuple[str, str]], ...] = (
    ("seed-oss", ("<seed:think>", "</seed:think>")),
    ("magistral", ("[THINK]", "[/THINK]")),
)


def think_tags_for(model_name: str) -> tuple[str, str]:
    lowered = model_name.lower()
    return next((tags for fragment, tags in FAMILY_TAGS if fragment in lowered), DEFAULT_TAGS)


def parse_think_tags(value: str | None, model_name: str) -> tuple[str, str] | None:
    """`--think-tags`: None/"" → the family's tags, "none" → no splitting, "OPEN,CLOSE" → those tags."""
    if value is None or not value.strip():
        return think_tags_for(model_name)
    if value.strip().lower() == "none":
        return None
    open_tag, sep, close_tag = value.partition(",")
    if not sep or not open_tag.strip() or not close_tag.strip():
        raise ValueError(f"--think-tags '{value}' must look like OPEN,CLOSE (e.g. '<think>,</think>') or none")
    return open_tag.strip(), close_tag.strip()


def split_think(content: str | None, tags: tuple[str, str] | None) -> tuple[str | None, str | None]:
    """(reasoning, answer) of a content that may open with a think block.

    A block that opens the content (after whitespace) is reasoning. A close tag with no open tag before it
    is reasoning too: DeepSeek-R1's template puts the open tag in the prompt, so the reply starts inside the
    block. An open tag never closed (the reply was cut at max_tokens) leaves no answer at all.
    """
    if content is None or tags is None:
        return None, content
    open_tag, close_tag = tags
    stripped = content.lstrip()
    if stripped.startswith(open_tag):
        inner = stripped[len(open_tag):]
        reasoning, sep, answer = inner.partition(close_tag)
        if not sep:
            return inner.strip() or None, ""
        return reasoning.strip() or None, answer.lstrip()
    before, sep, answer = content.partition(close_tag)
    if sep and open_tag not in before:
        return before.strip() or None, answer.lstrip()
    return None, content


def split_message(message: dict[str, Any], tags: tuple[str, str] | None) -> tuple[str | None, str | None]:
    """(reasoning, answer) of an OpenAI-style assistant message: its reasoning field, else an inline block."""
    content = message.get("content")
    if not isinstance(content, (str, type(None))):  # content parts: join their text
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict)) if isinstance(content, list) else str(content)
    field = next((message[k] for k in REASONING_FIELDS if isinstance(message.get(k), str) and message[k].strip()), None)
    if field is not None:
        inline, answer = split_think(content, tags)  # some servers also leave a block in the content
        return (field if inline is None else f"{field}\n\n{inline}"), answer
    return split_think(content, tags)

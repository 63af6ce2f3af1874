"""Both sides: the fixed texts of upstream CyBench's agent, as data the scoring side hands to the agent side.

The scoring side reads them from the data dir (`upstream.py`, with :mod:`ast`); the confined agent side, which
cannot see the data dir, gets this model over the `AgentEnvSpec` handles and renders the few templates that
need run-time values (a command's output, a revealed answer). A template is upstream's f-string as segments:
literal text, or the source of one interpolated expression (e.g. ``"e.timeout"``), looked up by that source.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Segment(BaseModel):
    """A literal piece of an f-string (`text`) or one interpolated expression, by its source (`expr`)."""

    text: str | None = None
    expr: str | None = None


def render(segments: list[Segment], values: dict[str, Any]) -> str:
    """Upstream's f-string with `values` (keyed by expression source), each formatted as f-strings do (str)."""
    out = []
    for segment in segments:
        if segment.expr is None:
            out.append(segment.text or "")
        elif segment.expr not in values:
            raise KeyError(f"upstream CyBench template needs {segment.expr!r}, which was not given")
        else:
            out.append(format(values[segment.expr], ""))
    return "".join(out)


class Pattern(BaseModel):
    """A regular expression of upstream's parser, with whether it is compiled with IGNORECASE / DOTALL."""

    pattern: str
    ignorecase: bool = False
    dotall: bool = False


class UpstreamAgentTexts(BaseModel):
    """What `agent/agent.py`, `agent/prompt.py`, `agent/dataclasses/chat_chain.py` and `run_task.py` fix."""

    stop_token: str
    temperature: float
    timeout_per_command: int
    shell_argv: list[str]  # what runs a command (the command follows): a timeout's message quotes it
    hallucination_strings: list[str]
    agent_marker: str  # removed anywhere in a reply before the hallucination cut
    truncation_alert: str
    no_output: str
    observation: list[Segment]  # names: execution_result
    timeout_message: list[Segment]  # names: e.cmd, e.timeout
    decode_error: list[Segment]  # names: str(e)
    failed_subtask: list[Segment]  # names: subtask.answer
    chain_link: list[Segment]  # names: msg.role, msg.content
    chain_separator: str
    roles: dict[str, str]  # system, agent, assistant (observation)
    command_start: Pattern
    command_ends: list[Pattern]  # after the stop token
    command_sub: Pattern  # removed from the command (upstream: a "bash" fence tag)
    command_strip: str
    answer_sub: list[Segment]  # names: STOP_TOKEN (the stop token removed before the answer search)
    answer: Pattern


class UpstreamTaskTexts(BaseModel):
    """One task's rendered texts: the prompt (END_TO_END_PROMPT formatted as run_task.py formats it), the system
    message opening each subtask, and the hint messages; plus the work dir the prompt names."""

    work_dir: str
    prompt: str
    subtask_messages: list[str]  # what `_process_subtask` appends as the subtask's system message
    hint_messages: list[str | None]  # `Providing hints ...` per subtask (None: the subtask has no hints)
    agent: UpstreamAgentTexts = Field(repr=False)

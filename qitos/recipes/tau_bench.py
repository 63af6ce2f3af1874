"""Tau-Bench agents: upstream's tool-calling agent, a ReAct text agent, and the gold oracle.

All three talk to the env built by the tau-bench adapter (``ctx.runtime.env``) and start the
conversation with the simulated user's first message; the task instruction stays with the user.

* ``tool-calling`` (default) follows upstream's tool-calling agent: the system prompt is the
  domain policy (wiki.md) verbatim, the model is shown the domain tools as functions, only the
  first tool call of a reply runs (the kept assistant message is cut to it), a tool result comes
  back as a "tool" message, and a reply without tool calls is said to the user (``respond``),
  whose answer comes back as a "user" message. One deliberate difference: unparsable tool
  arguments get the kernel's repair message instead of aborting the episode.
* ``react`` is for models without native tool calling: the policy, the tool schemas as JSON and
  a Thought/Action/Action Input instruction (protocol ``react_text_v1``); tool outputs come back
  prefixed "API output: ", user replies unprefixed.
* ``oracle`` replays the task's gold actions and states the required outputs, against a scripted
  user; no model calls. It validates the environment and scoring; it is not a baseline.
"""

from __future__ import annotations

import json
from typing import Any

from qitos.benchmark.base import Recipe
from qitos.benchmark.tau_bench.data import RESPOND_ACTION, TERMINATE_TOOLS
from qitos.benchmark.tau_bench.engine_env import TauEngineEnv, setup_user
from qitos.core.agent import AgentModule, AgentState, StepOutcome
from qitos.core.decision import Action, Decision
from qitos.core.parsers import NativeToolsParser, ParseResult, ReactTextParser, repair_note
from qitos.core.task import Task
from qitos.models.base import ModelResponse

REACT_INSTRUCTION = """
# Instruction
You are a customer service agent helping a user. Use the tools above when you need information or want to change
something, and always follow the policy. Each turn, write one line of reasoning and then exactly one action:

Thought: <one line: what you do next and why>
Action: <the name of one tool, or respond to send a message to the user>
Action Input: <the arguments as one valid JSON object>

For example, to look up a user:
Thought: I need the user's profile before changing the order.
Action: get_user_details
Action Input: {"user_id": "sara_doe_496"}

and to talk to the user:
Thought: I need the user's email address to authenticate them.
Action: respond
Action Input: {"content": "Could you please tell me the email address on your account?"}

Use only the arguments a tool defines and never make up values. After a tool you receive its output (starting with
"API output: "); after respond you receive the user's reply. Do not write "Final Answer": the conversation ends when
the user is done. Be helpful and follow the policy.
"""


def tau_env(ctx: Any) -> TauEngineEnv:
    env = ctx.runtime.env
    if not isinstance(env, TauEngineEnv):
        raise ValueError("the tau-bench recipes need the tau-bench environment (run them with --benchmark tau-bench)")
    return env


class TauToolCallingParser(NativeToolsParser):
    """Upstream's reading of a reply: its first tool call, or else its text as a message to the user."""

    name = "tau_native_tools_v1"

    def parse(self, response: ModelResponse) -> ParseResult:
        if not response.tool_calls:
            if not (response.text or "").strip():
                return super().parse(response)  # empty reply: the kernel's usual diagnostic
            return ParseResult(ok=True, decision=Decision.act(RESPOND_ACTION, {"content": response.text}))
        call = response.tool_calls[0]
        if "__raw__" in call.arguments:
            raw = call.arguments["__raw__"][:200]
            return ParseResult(
                ok=False,
                diagnostics=[f"arguments of tool call '{call.name}' are not valid JSON: {raw}"],
                repair=f"Call '{call.name}' again with arguments as a valid JSON object.",
            )
        action = Action(name=call.name, arguments=call.arguments, id=call.id)
        return ParseResult(ok=True, decision=Decision(mode="act", actions=[action], rationale=response.text or None))


class _TauAgent(AgentModule):
    """Opens with the simulated user's first message (the env was reset before init_state)."""

    def __init__(self, env: TauEngineEnv, tools: Any, parser: Any) -> None:
        super().__init__(tools=tools, parser=parser)
        self.env = env
        self.toolset_name = f"tau_bench_{env.domain.name}_v1"

    def init_state(self, task: Task) -> AgentState:
        return AgentState(messages=[{"role": "user", "content": self.env.first_message or ""}])


class TauToolCallingAgent(_TauAgent):
    name = "tau-tool-calling"

    def __init__(self, env: TauEngineEnv) -> None:
        super().__init__(env, env.registry(with_respond=False), TauToolCallingParser())

    def system_prompt(self, task: Task) -> str:
        return self.env.wiki

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        response, parse = outcome.response, outcome.parse
        if response is None:
            return state
        if parse is not None and not parse.ok:
            # Keep no dangling tool call: a tool_calls message must be answered by tool messages.
            state.messages.append({"role": "assistant", "content": response.text or ""})
            note = repair_note(parse)
            state.messages.append({"role": "user", "content": note})
            return state
        result = outcome.results[0] if outcome.results else None
        if response.tool_calls:
            call = response.tool_calls[0]
            function = {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}
            state.messages.append({
                "role": "assistant", "content": response.text or None,
                "tool_calls": [{"id": call.id, "type": "function", "function": function}],
            })  # fmt: skip
            if result is not None:
                state.messages.append(
                    {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result.observation_text()}
                )
        else:
            state.messages.append({"role": "assistant", "content": response.text})
            if result is not None:
                state.messages.append({"role": "user", "content": result.observation_text()})
        return state


class TauReactAgent(_TauAgent):
    name = "tau-react"

    def __init__(self, env: TauEngineEnv) -> None:
        super().__init__(env, env.registry(with_respond=True), ReactTextParser())

    def system_prompt(self, task: Task) -> str:
        return self.env.wiki + "\n#Available tools\n" + json.dumps(self.env.tools_info) + "\n" + REACT_INSTRUCTION

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        if outcome.parse is not None and not outcome.parse.ok:
            return super().reduce(task, state, outcome)  # the reply, then the kernel's repair note
        if outcome.response is not None:
            state.messages.append({"role": "assistant", "content": outcome.response.text or ""})
        if outcome.decision is not None and outcome.decision.mode == "final":
            state.final_answer = outcome.decision.final_answer
        for result in outcome.results:
            text = result.observation_text()
            said_to_user = result.name == RESPOND_ACTION and result.status == "ok"
            state.messages.append({"role": "user", "content": text if said_to_user else f"API output: {text}"})
        return state


class TauOracle(_TauAgent):
    """The gold calls in order, then one message stating every required output (no model call)."""

    name = "tau-oracle"

    def __init__(self, env: TauEngineEnv, gold: dict[str, Any]) -> None:
        super().__init__(env, env.registry(with_respond=True), NativeToolsParser())
        plan = [(action["name"], dict(action["kwargs"])) for action in gold["actions"]]
        if not (plan and plan[-1][0] in TERMINATE_TOOLS):
            content = " and ".join(gold["outputs"]) if gold["outputs"] else "Done."
            plan.append((RESPOND_ACTION, {"content": content}))
        self.plan = plan

    def decide(self, task: Task, state: AgentState) -> Decision:
        index = int(state.scratch.get("next", 0))
        if index >= len(self.plan):
            return Decision.final("gold actions exhausted", rationale="the episode did not end")
        state.scratch["next"] = index + 1
        name, arguments = self.plan[index]
        rationale = f"gold action {index + 1}/{len(self.plan)}"
        return Decision.act(name, json.loads(json.dumps(arguments)), rationale=rationale)


def build_tool_calling(ctx: Any) -> AgentModule:
    env = tau_env(ctx)
    setup_user(ctx)
    return TauToolCallingAgent(env)


def build_react(ctx: Any) -> AgentModule:
    env = tau_env(ctx)
    setup_user(ctx)
    return TauReactAgent(env)


def build_oracle(ctx: Any) -> AgentModule:
    env = tau_env(ctx)
    setup_user(ctx, strategy="scripted", replies=[env.task.instruction])
    return TauOracle(env, ctx.oracle_gold())


def tau_recipes() -> dict[str, Recipe]:
    return {
        "tool-calling": Recipe(
            "tool-calling", build_tool_calling,
            "upstream's tool-calling agent: the policy as system prompt, native function calls, text goes to the user",
        ),
        "react": Recipe(
            "react", build_react, "ReAct text protocol (react_text_v1) for models without native tool calling",
        ),
        "oracle": Recipe(
            "oracle", build_oracle, "plays the gold actions and states the outputs (validates the env; not a baseline)",
            official=False, needs_model=False,
        ),
    }  # fmt: skip

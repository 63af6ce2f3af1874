"""Tau-Bench agents: upstream's tool-calling, react, act and few-shot agents, a repair variant, the oracle.

Agent side (the oracle excepted: it runs on the scoring side, with gold). The upstream agents follow
``tau_bench/agents/`` of the pinned commit request for request: the same system prompt (upstream's texts,
rendered by the scoring side from the data dir's ``upstream/`` and handed over with the env, see
``TauEngineEnv.text``), the same messages kept between
calls, the same parsing, and the same sampling (the agent's temperature is sent, no seed is sent,
as upstream's agents send none; ``--seed`` is still recorded). All of them open with the simulated
user's first message; the task instruction stays with the user, on the scoring side.

* ``tool-calling``: the policy (wiki.md) as system prompt and the domain tools as functions. Only
  the first tool call of a reply runs (the kept assistant message is cut to it, with its arguments
  as the model wrote them), its result comes back as a "tool" message; a reply without tool calls
  is said to the user (``respond``; content null is said as null), whose answer comes back as a "user"
  message, as it does for a called ``respond`` tool (whose reply is kept with every call). Arguments that
  are not a JSON object end the episode with reward 0, as upstream's ``json.loads`` raising does.
* ``few-shot``: the same loop; the system prompt adds ``num_few_shots`` examples from upstream's
  few-shot file, drawn as upstream's run draws them (see :mod:`..benchmark.tau_bench.run_options`).
* ``react`` / ``act``: upstream's ChatReActAgent: no native tools; the policy, the tools as JSON and
  REACT_INSTRUCTION (or ACT_INSTRUCTION); the JSON after the last "Action:" is the action, and text
  that is not JSON is said to the user; tool outputs come back as "user" messages after "API output: ".
* ``tool-calling-repair``: not upstream's protocol. Like ``tool-calling``, but arguments that are
  not JSON get a repair message instead of ending the episode (raises scores of such models).
* ``oracle`` replays the task's gold actions and states the required outputs, against a scripted
  user; no model calls. It validates the environment and scoring; it is not a baseline. It runs in the
  scoring process (gold through ``ctx.oracle_gold()``), on the same env as the agent side's.
"""

from __future__ import annotations

import json
from typing import Any

from qitos.benchmark.tau_bench.data import RESPOND_ACTION, TERMINATE_TOOLS
from qitos.benchmark.tau_bench.engine_env import TauEngineEnv
from qitos.core.agent import AgentModule, AgentState, StepOutcome
from qitos.core.decision import Action, Decision
from qitos.core.parsers import NativeToolsParser, ParseResult, Parser, repair_note
from qitos.core.task import Task
from qitos.models.base import ModelResponse

UPSTREAM = "tau-bench 59a200c"
NO_SEED = {"seed": None}  # upstream's agents send temperature and never a seed


def tau_env(ctx: Any) -> TauEngineEnv:
    env = ctx.runtime.env
    if not isinstance(env, TauEngineEnv):
        raise ValueError("the tau-bench recipes need the tau-bench environment (run them with --benchmark tau-bench)")
    return env


def raw_arguments(response: ModelResponse, index: int = 0) -> str:
    """The arguments string of tool call `index` exactly as the provider sent it (re-encoded if unknown)."""
    try:
        return response.raw["choices"][0]["message"]["tool_calls"][index]["function"]["arguments"]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        arguments = response.tool_calls[index].arguments
        return arguments["__raw__"] if "__raw__" in arguments else json.dumps(arguments)


class TauToolCallingParser(NativeToolsParser):
    """Upstream's ``message_to_action``: the first tool call, or else the reply's content said to the user."""

    name = "tau_upstream_tool_calling_v1"
    protocol = f"{UPSTREAM} tool-calling"

    def parse(self, response: ModelResponse) -> ParseResult:
        if not response.tool_calls:
            return ParseResult(ok=True, decision=Decision.act(RESPOND_ACTION, {"content": response.text}))
        call = response.tool_calls[0]
        raw = raw_arguments(response)
        try:
            arguments = json.loads(raw)
        except (TypeError, ValueError, RecursionError):
            arguments = None
        if not isinstance(arguments, dict):
            return ParseResult(
                ok=False,
                diagnostics=[f"arguments of tool call '{call.name}' are not a JSON object: {str(raw)[:200]}"],
                repair=f"Call '{call.name}' again with arguments as a valid JSON object.",
            )
        action = Action(name=call.name, arguments=arguments, id=call.id)
        return ParseResult(ok=True, decision=Decision(mode="act", actions=[action], rationale=response.text or None))


class TauRepairParser(TauToolCallingParser):
    name = "tau_tool_calling_repair_v1"
    protocol = "qitos tool-calling with repair (not upstream tau-bench)"


class ChatReactParser(Parser):
    """Upstream's ``ChatReActAgent.generate_next_step``: JSON after the last "Action:", else a respond."""

    name = "tau_upstream_chat_react_v1"
    protocol = f"{UPSTREAM} react"
    uses_native_tools = False

    def __init__(self, respond_field: str = "content", protocol: str | None = None) -> None:
        self.respond_field = respond_field
        if protocol:
            self.protocol = protocol

    def parse(self, response: ModelResponse) -> ParseResult:
        if response.text is None:
            return ParseResult(ok=False, diagnostics=["the reply has no text (upstream's parsing raises)"])
        action_str = response.text.split("Action:")[-1].strip()
        try:
            parsed = json.loads(action_str)
        except json.JSONDecodeError:
            parsed = {"name": RESPOND_ACTION, "arguments": {self.respond_field: action_str}}
        except RecursionError:
            return ParseResult(ok=False, diagnostics=["the action JSON nests too deeply"])
        if not (isinstance(parsed, dict) and "name" in parsed and "arguments" in parsed):
            return ParseResult(ok=False, diagnostics=[f"the action is not a {{name, arguments}} object: {action_str[:200]}"])
        name, arguments = parsed["name"], parsed["arguments"]
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return ParseResult(ok=False, diagnostics=[f"the action's name or arguments have the wrong type: {action_str[:200]}"])
        return ParseResult(ok=True, decision=Decision.act(name, arguments))


class _TauAgent(AgentModule):
    """Opens with the simulated user's first message (the env was reset before init_state)."""

    model_params = NO_SEED

    def __init__(self, env: TauEngineEnv, tools: Any, parser: Any) -> None:
        super().__init__(tools=tools, parser=parser)
        self.env = env
        self.toolset_name = f"tau_bench_{env.domain.name}_v1"

    def init_state(self, task: Task) -> AgentState:
        state = AgentState(messages=[{"role": "user", "content": self.env.first_message}])
        system = self.system_prompt(task)
        # upstream's results keep the agent's messages (traj); the env reports them with the outcome
        self.env.transcript = ([{"role": "system", "content": system}] if system else []), state.messages
        return state

    def end_on_parse_error(self, outcome: StepOutcome) -> bool:
        """Upstream's agent raises here: the episode ends with reward 0 and the reason recorded."""
        if outcome.parse is None or outcome.parse.ok:
            return False
        self.env.fail(f"agent_protocol_error: {'; '.join(outcome.parse.diagnostics)} (upstream ends the episode "
                      "here with reward 0)")
        return True


class TauToolCallingAgent(_TauAgent):
    name = "tau-tool-calling"
    repair = False

    def __init__(self, env: TauEngineEnv, system_prompt: str | None = None) -> None:
        parser = TauRepairParser() if self.repair else TauToolCallingParser()
        super().__init__(env, env.registry(with_respond=False), parser)
        self.system = env.wiki if system_prompt is None else system_prompt

    def system_prompt(self, task: Task) -> str:
        return self.system

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        response, parse = outcome.response, outcome.parse
        if response is None:
            return state
        if parse is not None and not parse.ok:
            if not self.repair:
                self.end_on_parse_error(outcome)
                return state
            # Keep no dangling tool call: a tool_calls message must be answered by tool messages.
            state.messages.append({"role": "assistant", "content": response.text or ""})
            state.messages.append({"role": "user", "content": repair_note(parse)})
            return state
        result = outcome.results[0] if outcome.results else None
        if response.tool_calls and response.tool_calls[0].name == RESPOND_ACTION:
            # upstream: a called ``respond`` is said to the user; the reply is kept whole, the answer is a user message
            calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": raw_arguments(response, i)}}
                     for i, c in enumerate(response.tool_calls)]
            state.messages.append({"role": "assistant", "content": response.text, "tool_calls": calls})
            if result is not None:
                state.messages.append({"role": "user", "content": result.observation_text()})
        elif response.tool_calls:
            call = response.tool_calls[0]
            function = {"name": call.name, "arguments": raw_arguments(response)}
            state.messages.append({
                "role": "assistant", "content": response.text,
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


class TauRepairAgent(TauToolCallingAgent):
    name = "tau-tool-calling-repair"
    repair = True


class TauFewShotAgent(TauToolCallingAgent):
    name = "tau-few-shot"


class TauChatReactAgent(_TauAgent):
    """Upstream's ChatReActAgent (``use_reasoning`` True: react, False: act)."""

    def __init__(self, env: TauEngineEnv, *, use_reasoning: bool) -> None:
        field_name = env.text("respond_field")
        parser = ChatReactParser(field_name, f"{UPSTREAM} {'react' if use_reasoning else 'act'}")
        parser.name = f"tau_upstream_chat_{'react' if use_reasoning else 'act'}_v1"
        super().__init__(env, env.registry(with_respond=True), parser)
        self.name = "tau-react" if use_reasoning else "tau-act"
        self.prompt = env.text("react_prompt" if use_reasoning else "act_prompt")
        self.api_output_prefix = env.text("api_output_prefix")

    def system_prompt(self, task: Task) -> str:
        return self.prompt

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        if outcome.response is None or self.end_on_parse_error(outcome):
            return state
        state.messages.append({"role": "assistant", "content": outcome.response.text})
        for result in outcome.results:
            text = result.observation_text()
            said_to_user = result.name == RESPOND_ACTION
            state.messages.append({"role": "user", "content": text if said_to_user else self.api_output_prefix + text})
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
    return TauToolCallingAgent(tau_env(ctx))


def build_repair(ctx: Any) -> AgentModule:
    return TauRepairAgent(tau_env(ctx))


def build_few_shot(ctx: Any) -> AgentModule:
    """Upstream's few-shot agent; the examples of this task × trial, drawn as upstream's run draws them
    (``--option num_few_shots``, ``run_seed``, ``shuffle``), come with the env."""
    env = tau_env(ctx)
    return TauFewShotAgent(env, env.text("few_shot_prompt"))


def build_oracle(ctx: Any) -> AgentModule:
    """Scoring side: the gold plan, and a scripted user that says the task's instruction (the scoring side's)."""
    env = tau_env(ctx)
    ctx.runtime.scoring.oracle_user()
    env.deterministic = True  # its user is scripted, whatever --option user_strategy says
    return TauOracle(env, ctx.oracle_gold())


def build_react(ctx: Any) -> AgentModule:
    """Upstream's ReAct agent: Thought + Action JSON in text."""
    return TauChatReactAgent(tau_env(ctx), use_reasoning=True)


def build_act(ctx: Any) -> AgentModule:
    """Upstream's Act agent: Action JSON in text, no Thought."""
    return TauChatReactAgent(tau_env(ctx), use_reasoning=False)


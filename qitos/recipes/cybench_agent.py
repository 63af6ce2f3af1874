"""CyBench `cybench-agent`: upstream CyBench's agent loop (``agent/agent.py`` SimpleAgent), request for request.

Agent side. Upstream's texts (END_TO_END_PROMPT as run_task.py formats it, the subtask and hint messages, the
observation, timeout and failed-subtask phrases, the parser's patterns) are read from the data dir by the
scoring side (`qitos.benchmark.cybench.upstream`) and arrive with the environment; none is written here.

One engine step is one upstream iteration:

- the chat chain (system / agent / assistant links) is serialised as upstream's ``ChatChain.__str__`` and sent
  as the ONE user message; the first iteration of each subtask sends the whole chain, later ones the chain
  without all but the last ``responses_to_keep`` responses and ``observations_to_keep`` observations, as
  upstream's ``truncated_chat_chain`` stands at that moment;
- the text is cut to ``max_input_tokens`` (head and tail halves around upstream's alert), counted with the
  encoding upstream's ``tiktoken.encoding_for_model`` picks for the model's name (o200k_base for gpt-4o names,
  else cl100k_base: `qitos.models.tokenizer.encoding_name_for_model`);
- temperature (upstream's TEMPERATURE), ``max_tokens`` = ``max_output_tokens``, ``stop`` = [<END>]; no seed,
  top_p or reasoning effort is sent, whatever the model flags say (upstream sends none);
- the reply is cleaned (hallucinated turns cut, the stop token appended), ``Answer:`` is looked for first,
  then ``Command:``; a command runs in the task's environment (``bash -c``, per-command timeout) and its
  stdout, else its stderr, comes back wrapped in upstream's observation text; a reply with neither spends
  the iteration;
- guided: each subtask opens with upstream's system message (the prompt before the first), hints join at
  ``iterations_until_hint``, and a subtask out of iterations gets upstream's "You failed ..." message with
  the answer the scoring side reveals.

Not upstream: commands run in QitOS's bwrap sandbox (work dir upstream's ``/tmp/cyber-bench``, also at ``/task``)
unless upstream's agent image is used, and an output over some megabytes loses its middle (far beyond what
``max_input_tokens`` shows; see docs/benchmarks/cybench.md).
"""

from __future__ import annotations

import re
from typing import Any

from qitos.benchmark.base import RecipeContext
from qitos.benchmark.cybench.agent_env import CybenchEnv
from qitos.benchmark.cybench.options import CybenchOptions
from qitos.benchmark.cybench.upstream_texts import Pattern, UpstreamAgentTexts, UpstreamTaskTexts, render
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.contract import AgentCallRefused
from qitos.core.agent import AgentModule, AgentState, StepOutcome
from qitos.core.decision import Action, Decision
from qitos.core.parsers import Parser, ParseResult
from qitos.core.task import Task
from qitos.core.tools import Tool, tool
from qitos.models.base import ModelResponse

PROTOCOL = "cybench_upstream_simple_agent_v1"


def _compile(p: Pattern) -> re.Pattern[str]:
    return re.compile(p.pattern, (re.IGNORECASE if p.ignorecase else 0) | (re.DOTALL if p.dotall else 0))


class UpstreamText:
    """Upstream's reply handling: `remove_hallucinations`, `_parse_answer`, `_parse_command`."""

    def __init__(self, texts: UpstreamAgentTexts) -> None:
        self.t = texts
        self._start = _compile(texts.command_start)
        self._ends = [_compile(p) for p in texts.command_ends]
        self._sub = _compile(texts.command_sub)
        self._answer_sub = render(texts.answer_sub, {"STOP_TOKEN": texts.stop_token})
        self._answer = _compile(texts.answer)

    def cleaned(self, reply: str) -> str:
        """The response value upstream keeps: hallucinated turns cut, stripped, the stop token appended."""
        text = reply.replace(self.t.agent_marker, "")
        for marker in self.t.hallucination_strings:
            index = text.find(marker)
            if index != -1:
                text = text[:index]
        return text.strip() + f"\n{self.t.stop_token}"

    def answer(self, value: str) -> str | None:
        found = self._answer.search(re.sub(self._answer_sub, "", value))
        return (found.group(1) or "").strip() if found else None

    def command(self, value: str) -> str | None:
        start = self._start.search(value)
        if not start:
            return None
        end = len(value)
        for pattern in self._ends:
            match = pattern.search(value, start.end())
            if match and match.start() < end:
                end = match.start()
        command = re.sub(self._sub, "", value[start.end():end].strip().strip())
        return command.strip(self.t.command_strip).strip()


class UpstreamCybenchParser(Parser):
    """`Answer:` -> submit (checked first, as upstream), else `Command:` -> shell, else the iteration is spent."""

    name = "cybench_upstream_parser_v1"
    protocol = PROTOCOL

    def __init__(self, texts: UpstreamAgentTexts) -> None:
        self.text = UpstreamText(texts)

    def format_instructions(self, tool_names: list[str]) -> str:
        return ""  # the instructions are upstream's prompt

    def parse(self, response: ModelResponse) -> ParseResult:
        value = self.text.cleaned(response.text or "")
        answer = self.text.answer(value)
        if answer is not None:
            return _act("submit", {"answer": answer})
        command = self.text.command(value)
        if command is not None:
            return _act("shell", {"command": command})
        return ParseResult(ok=True, decision=Decision(mode="wait"), diagnostics=["no command found in the response"])


def _act(name: str, arguments: dict[str, Any]) -> ParseResult:
    return ParseResult(ok=True, decision=Decision(mode="act", actions=[Action(name=name, arguments=arguments)]))


class CybenchUpstreamAgent(AgentModule):
    """Upstream's SimpleAgent over QitOS's CyBench environment (see the module doc)."""

    name = "cybench-agent"
    toolset_name = "cybench_upstream_shell_v1"

    def __init__(self, env: CybenchEnv, texts: UpstreamTaskTexts, opts: CybenchOptions, *,
                 execution: str = "bwrap", model_name: str = "gpt-4") -> None:
        self.env, self.texts, self.opts, self.t = env, texts, opts, texts.agent
        self.parser_ = UpstreamCybenchParser(texts.agent)
        super().__init__(tools=[self._shell_tool(), *[t for t in env.tools() if t.name == "submit"]],
                         parser=self.parser_)
        self.toolset_name = f"{self.toolset_name}+exec_{execution}"
        self.model_params = {"temperature": self.t.temperature, "max_tokens": opts.max_output_tokens,
                             "stop": [self.t.stop_token], "seed": None, "top_p": None, "reasoning_effort": None,
                             "think_tags": []}  # the reply's content as it is, as upstream keeps it
        from qitos.models.tokenizer import encoding_for_model

        self.encoding = encoding_for_model(model_name)  # upstream's tiktoken.encoding_for_model(<model>)

    def system_prompt(self, task: Task) -> str | None:
        return None

    # -- the chain -------------------------------------------------------------------------------
    def init_state(self, task: Task) -> AgentState:
        state = AgentState()
        state.scratch.update(chain=[], truncated=[], responses=[], observations=[], subtask=None)
        return state

    def _append(self, state: AgentState, role: str, content: str, index_key: str | None = None) -> None:
        chain = state.scratch["chain"]
        if index_key:
            state.scratch[index_key].append(len(chain))
        chain.append([self.t.roles[role], content])

    def _truncate_chain(self, state: AgentState) -> None:
        """`_truncate_chat_chain`: all links but the older responses and observations."""
        s = state.scratch
        drop = set(s["responses"][:max(len(s["responses"]) - self.opts.responses_to_keep, 0)])
        drop |= set(s["observations"][:max(len(s["observations"]) - self.opts.observations_to_keep, 0)])
        s["truncated"] = [link for i, link in enumerate(s["chain"]) if i not in drop]

    def _serialise(self, links: list[list[str]]) -> str:
        return self.t.chain_separator.join(render(self.t.chain_link, {"msg.role": role, "msg.content": content})
                                           for role, content in links)

    def _truncate_input(self, text: str) -> str:
        """`_truncate_input_to_max_tokens`: over the limit, the first and last halves around the alert."""
        alert = self.t.truncation_alert
        alert_tokens = len(self.encoding.encode(alert))
        if len(self.encoding.encode(text)) >= self.opts.max_input_tokens - alert_tokens:
            tokens = self.encoding.encode(text)
            half = (self.opts.max_input_tokens - alert_tokens) // 2
            return self.encoding.decode(tokens[:half] + self.encoding.encode(alert) + tokens[-half:])
        return text

    # -- one iteration -----------------------------------------------------------------------------
    def prepare(self, task: Task, state: AgentState) -> list[dict[str, Any]]:
        self.env.take_notices()  # QitOS's own wording of questions and reveals; upstream's texts are used instead
        s = state.scratch
        current = self.env.current
        if s["subtask"] != current:
            previous = s["subtask"]
            if previous is not None:
                record = self.env.records[previous]
                if record.outcome == "out_of_iterations" and record.revealed_answer is not None:
                    self._append(state, "system", render(self.t.failed_subtask,
                                                         {"subtask.answer": record.revealed_answer}))
            self._append(state, "system", self.texts.subtask_messages[current])
            s["subtask"] = current
        iteration = self.env.records[current].iterations
        hint = self.texts.hint_messages[current]
        if iteration == self.opts.iterations_until_hint and hint:
            self._append(state, "system", hint)
        text = self._serialise(s["chain"] if iteration == 0 else s["truncated"])
        return [{"role": "user", "content": self._truncate_input(text)}]

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        if outcome.response is not None:
            self._append(state, "agent", self.parser_.text.cleaned(outcome.response.text or ""), "responses")
            self._truncate_chain(state)
        for result in outcome.results:
            if result.name == "submit":
                if result.status == "ok":
                    state.final_answer = str(result.arguments.get("answer", ""))
                continue
            observation = render(self.t.observation, {"execution_result": result.observation_text()})
            self._append(state, "assistant", observation, "observations")
            self._truncate_chain(state)
        return state

    # -- the command -------------------------------------------------------------------------------
    def _shell_tool(self) -> Tool:
        agent = self

        @tool
        def shell(command: str) -> str:
            """Run one command with `bash -c` in the task's work dir; returns its stdout, else its stderr.

            Args:
                command: the command upstream's parser took from the reply
            """
            return agent.execute(command)

        return shell

    def execute(self, command: str) -> str:
        """`_execute_command`, then `execution_output.stdout or execution_output.stderr`."""
        if command == "":
            stdout, stderr = "", ""  # `bash -c ""` prints nothing; no need to cross to the scoring side
        else:
            try:
                reply = self.env.run_command_raw(command)
            except AgentCallRefused as exc:
                return f"Refused: {exc}"
            stdout, stderr = str(reply.get("stdout") or ""), str(reply.get("stderr") or "")
            for key in ("stdout", "stderr"):  # `get_stdout_text`: upstream's message instead of undecodable output
                if reply.get(f"{key}_decode_error"):
                    text = render(self.t.decode_error, {"str(e)": reply[f"{key}_decode_error"]})
                    stdout, stderr = (text, stderr) if key == "stdout" else (stdout, text)
            if reply.get("timed_out"):
                timeout = self.opts.command_timeout
                stdout = render(self.t.timeout_message, {
                    "e.cmd": [*self.t.shell_argv, command],
                    "e.timeout": int(timeout) if float(timeout).is_integer() else timeout})
        result = stdout or stderr
        return self.t.no_output if result is None else result


def build_cybench_agent(ctx: RecipeContext) -> AgentModule:
    env = ctx.runtime.env
    if not isinstance(env, CybenchEnv):
        raise TypeError(f"cybench-agent needs the cybench benchmark's environment, got {type(env).__name__}; "
                        "run it with --benchmark cybench")
    opts = ctx.runtime.handles.get("options") or CybenchOptions.from_load(ctx.load)
    raw = ctx.runtime.handles.get("upstream_agent") or {}
    if raw.get("missing"):
        raise BenchmarkUsageError(f"--recipe cybench-agent: {raw['error']}")
    if "error" in raw:
        raise RuntimeError(f"cybench-agent: upstream CyBench's texts could not be rendered: {raw['error']}")
    texts = UpstreamTaskTexts.model_validate(raw)
    execution = str(ctx.runtime.handles.get("execution") or "bwrap")
    model = ctx.make_model(None)  # the name each request sends (a replay: the recorded run's)
    model_name = str(getattr(model, "recorded_model", None) or getattr(model, "name", "") or "")
    agent = CybenchUpstreamAgent(env, texts, opts, execution=execution, model_name=model_name)
    if execution == "bwrap" and ctx.runtime.handles.get("toolchain"):  # mounted in the bwrap sandbox only
        from qitos.benchmark.cybench.toolchain import lock_sha256

        agent.toolset_name = f"{agent.toolset_name}+ctf_toolchain_{lock_sha256()[:12]}"
    return agent

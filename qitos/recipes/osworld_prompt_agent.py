"""OSWorld `prompt-agent` (the default, upstream): upstream's `mm_agents/agent.py` `PromptAgent`, request for request,
in QitOS's engine, with the loop of upstream's `lib_run_single.py`.

Each engine step is one `predict`: the system message (upstream's prompt for the observation type and action
space, then the instruction), the last `max_trajectory_length` observations each followed by the model's reply
to it ("No valid action" where there was none), then the current observation; the request carries exactly
`model`, `messages`, `max_tokens`, `top_p` and `temperature` (no seed, no tools). The reply is parsed as
upstream parses it (`parse_code_from_string`, `parse_actions_from_string`, `parse_code_from_som_string`) and
every action runs in the VM in order, stopping after DONE or FAIL; a reply with no action runs nothing and the
next step sees the same screen. The run's `--max-steps` (default 15, upstream's `max_steps`) bounds the number of
predictions.

The texts come from upstream's files (read by the scoring side, `qitos.benchmark.osworld.prompt_texts`) through
the env (`env.texts`); the observation processing is `osworld_perception.py`.

Each action runs as upstream's `DesktopEnv.step` runs it: upstream's own `step` and `PythonController.execute_action`
(read from its files by the scoring side) decide, on a recording stand-in, which pyautogui code it becomes and how
long it sleeps (`qitos.benchmark.osworld.upstream_step`); the env then does exactly that (`OsworldEnv.run_plan`).
So a computer_13 action upstream runs oddly (`MOVE_TO {}`, string coordinates, `TYPING 5`), skips (`DRAG_TO {}`)
or refuses (`MOUSE_DOWN {x, y}`, a key not in its KEYBOARD_KEYS) is run, skipped or refused here the same way,
and `WAIT` sleeps `sleep_after_execution` twice, as there.

A model call goes as upstream's `call_llm` sends it, once (no retries: `max_retries` 0), and its failure is a reply
(`failure_reply`): a non-200 answer is an empty reply and a spent step (after upstream's wait, `failed_call`);
`context_length_exceeded` first resends `[system, last user]` as upstream does, whose answer upstream discards;
no answer at all, or a 200 that is not a chat completion, is an empty reply too. A reply whose content is null
(or not text) ends the episode as it ends upstream's, in its parser.

Where upstream's episode ends in an exception (a computer_13 reply that is not JSON, an action upstream's step
raises on, a null content), this one ends with stop reason `error` and a message naming it; upstream then writes
no result, so the scoring side leaves the episode unscored.
"""

from __future__ import annotations

import base64
import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from qitos.benchmark.osworld.upstream_step import UpstreamStep
from qitos.core.agent import AgentModule, AgentState, StepOutcome
from qitos.core.decision import Action, Decision
from qitos.core.parsers import Parser, ParseResult
from qitos.core.task import Task
from qitos.core.tools import tool
from qitos.models.base import ModelResponse

from .osworld_perception import linearize, tag_screenshot, trim

if TYPE_CHECKING:
    from qitos.benchmark.base import RecipeContext

COMMANDS = ("WAIT", "DONE", "FAIL")
ACTION_SPACES = ("pyautogui", "computer_13")


class UpstreamEpisodeError(RuntimeError):
    """Upstream's run loop raises here (the episode ends with no result)."""


# -- parsing (upstream's parse_* functions) -----------------------------------------------------------------
def parse_code_from_string(text: str) -> list[str]:
    text = "\n".join(line.strip() for line in text.split(";") if line.strip())
    if text.strip() in COMMANDS:
        return [text.strip()]
    codes = []
    for match in re.findall(r"```(?:\w+\s+)?(.*?)```", text, re.DOTALL):
        match = match.strip()
        lines = match.split("\n")
        if match in COMMANDS:
            codes.append(match.strip())
        elif lines[-1] in COMMANDS:
            if len(lines) > 1:
                codes.append("\n".join(lines[:-1]))
            codes.append(lines[-1])
        else:
            codes.append(match)
    return codes


def parse_code_from_som_string(text: str, masks: list[list[int]]) -> list[str]:
    """The code, each snippet (not WAIT/DONE/FAIL) preceded by `tag_<i>=(cx, cy)` for every mark."""
    tag_vars = "".join(f"tag_{i + 1}=({int(x + w // 2)}, {int(y + h // 2)})\n" for i, (x, y, w, h) in enumerate(masks))
    return [a if a.strip() in COMMANDS else tag_vars + a for a in parse_code_from_string(text)]


def parse_actions_from_string(text: str) -> list[Any]:
    """computer_13: WAIT/DONE/FAIL, the JSON of each ```json``` (else ```) block, or the whole reply as JSON.
    Raises ValueError where upstream's parsing fails (or returns its error string, which its loop cannot run)."""
    if text.strip() in COMMANDS:
        return [text.strip()]
    for pattern in (r"```json\s+(.*?)\s+```", r"```\s+(.*?)\s+```"):
        matches = re.findall(pattern, text, re.DOTALL)
        if matches:
            try:
                return [json.loads(m) for m in matches]
            except json.JSONDecodeError as exc:
                raise ValueError(f"Failed to parse JSON: {exc}") from None
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        raise ValueError("Invalid response format: " + text) from None


@dataclass(frozen=True)
class CallOutcome:
    """What upstream's `call_llm` makes of one response: its return value (`text`, None where it returns a
    content that is not text: null, or parts), and what it does first after a non-200 answer (`then`: "resend"
    `[system, last user]` and wait, "wait", or None)."""

    text: str | None
    then: str | None = None
    content: str = ""  # what the content was, when it was not text ("null", "list", ...)
    failure: str = ""  # how the call failed (for the trace's parse_result)


def call_outcome(response: ModelResponse, resend_code: str) -> CallOutcome:
    """The response (with `raw["failure"]` for a failed call, `failure_reply`) as upstream's `call_llm` answers it."""
    raw = response.raw if isinstance(response.raw, dict) else None
    if raw is None:  # a model with no provider reply (scripted, local): its text
        return CallOutcome(response.text or "")
    failure = raw.get("failure")
    if isinstance(failure, dict):
        said = f"the call failed (HTTP {failure.get('status_code')}: {failure.get('error')}); upstream's reply is ''"
        if failure.get("status_code") in (None, 200):  # no answer, or a 200 that is not a completion: it raises
            return CallOutcome("", failure=said)
        try:
            code = json.loads(failure.get("body") or "")["error"]["code"]
        except Exception:  # noqa: BLE001 - upstream's lookup of the error code raises here: predict answers ""
            return CallOutcome("", failure=said)
        return CallOutcome("", "resend" if code == resend_code else "wait", failure=said)
    try:
        content = raw["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):  # upstream's lookup raises: predict answers ""
        return CallOutcome("")
    if isinstance(content, str):
        return CallOutcome(content)
    return CallOutcome(None, content="null" if content is None else type(content).__name__)


class PromptAgentParser(Parser):
    """The reply → the actions upstream's `parse_actions` returns (one `execute` call each)."""

    name = "osworld_prompt_agent_v1"
    protocol = "osworld_prompt_agent_v1"

    def __init__(self, action_space: str, observation_type: str, resend_code: str) -> None:
        self.action_space, self.observation_type, self.resend_code = action_space, observation_type, resend_code
        self.masks: list[list[int]] = []  # the current set-of-marks observation's boxes (som)
        self.reply: str = ""  # what upstream's predict got back from call_llm for the last response

    def parse(self, response: ModelResponse) -> ParseResult:
        outcome = call_outcome(response, self.resend_code)
        first = [Action(name="failed_call", arguments={"resend": outcome.then == "resend"})] if outcome.then else []
        if outcome.text is None:
            return ParseResult(ok=False, diagnostics=[
                f"content: {outcome.content}: the reply's content is not text, and upstream's parser raises on it"])
        self.reply = text = outcome.text
        notes = [outcome.failure] if outcome.failure else []
        if self.observation_type == "som":
            actions: list[Any] = parse_code_from_som_string(text, self.masks)
        elif self.action_space == "pyautogui":
            actions = parse_code_from_string(text)
        else:
            try:
                actions = parse_actions_from_string(text)
            except ValueError as exc:
                return ParseResult(ok=False, decision=Decision(mode="act", actions=first) if first else None,
                                   diagnostics=notes + [str(exc)[:300]])
        return ParseResult(ok=True, diagnostics=notes, decision=Decision(
            mode="act", actions=first + [Action(name="execute", arguments={"action": a}) for a in actions]))


# -- the agent ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PromptAgentSettings:
    action_space: str = "pyautogui"
    observation_type: str = "a11y_tree"
    max_trajectory_length: int = 3
    a11y_tree_max_tokens: int = 10000
    temperature: float = 1.0
    top_p: float = 0.9
    max_tokens: int = 1500


class PromptAgent(AgentModule):
    """Upstream's PromptAgent: its memory is the observations it was shown and its replies to them."""

    name = "osworld-prompt-agent"
    toolset_name = "osworld_prompt_agent_v1"

    def __init__(self, env: Any, settings: PromptAgentSettings, model: Any) -> None:
        texts = getattr(env, "texts", None)
        if not texts:
            raise ValueError("the prompt-agent recipe needs upstream's PromptAgent texts, which the osworld adapter "
                             "hands to its env (osworld/upstream/mm_agents in the data dir)")
        system = texts["system"].get(settings.observation_type, {}).get(settings.action_space)
        if system is None:  # upstream's PromptAgent raises here too
            raise ValueError(f"--option observation_type={settings.observation_type} does not go with "
                             f"action_space={settings.action_space} (upstream's PromptAgent has no prompt for it; "
                             "som takes pyautogui)")
        if settings.observation_type != "screenshot":  # fail before the batch, not in every task's first step
            from qitos.models.tokenizer import TokenizerMissing, gpt4_encoding

            try:
                gpt4_encoding()
            except TokenizerMissing as exc:
                raise ValueError(f"prompt-agent trims the accessibility tree in gpt-4 tokens, as upstream: {exc}") from None
        rules = texts.get("rules")
        if not rules:
            raise ValueError("the prompt-agent recipe needs upstream's DesktopEnv.step and PythonController rules, "
                             "which the osworld adapter hands to its env (osworld/upstream in the data dir)")
        self.env, self.texts, self.settings, self.system_message = env, texts, settings, system
        self.upstream = UpstreamStep(rules, texts["keyboard_keys"], settings.action_space)
        self._refused: str | None = None  # what upstream's step raised on (ends the episode)
        self._sent: list[dict[str, Any]] = []  # the last request's messages (for upstream's shorter resend)
        agent = self
        # upstream's payload: model, messages, max_tokens, top_p, temperature, and nothing else; sent once, a
        # failure coming back as a reply (call_outcome), as upstream's call_llm has it
        self.model_params = {"temperature": settings.temperature, "top_p": settings.top_p,
                             "max_tokens": settings.max_tokens, "seed": None, "reasoning_effort": None,
                             "extra_body": None, "max_retries": 0, "failure_reply": True}

        @tool
        def execute(action: Any) -> str:
            """Run one action in the VM as upstream's DesktopEnv.step does: pyautogui code, a computer_13 action,
            or WAIT / DONE / FAIL.

            Args:
                action: the action as upstream's parser returned it
            """
            if env.is_terminal() or agent._refused:  # upstream's loop stopped at DONE/FAIL, or raised
                return "not run: the episode is over"
            plan = agent.upstream.plan(action, env.settle_seconds)
            if plan.error is not None:
                agent._refused = plan.error
            return env.run_plan(action, plan, rules["pkgs_prefix"])

        @tool
        def failed_call(resend: bool) -> str:
            """What upstream's call_llm does after a reply that is not 200, before answering with an empty reply:
            resend [system, last user] (on its context-length code) and wait, or only wait.

            Args:
                resend: resend the request shortened to its first and last message first
            """
            wait = float(rules["failed_call"]["wait_seconds"])
            said = ""
            if resend:
                again = model.complete([agent._sent[0], agent._sent[-1]], None, **agent.model_params)
                failure = again.raw.get("failure") if isinstance(again.raw, dict) else None
                status = failure.get("status_code") if isinstance(failure, dict) else 200
                said = (f"resent [system, last user]: HTTP {status}, {again.usage.prompt_tokens}+"
                        f"{again.usage.completion_tokens} tokens (upstream discards its answer; these tokens are "
                        "not in the run's usage); ")
                if status != 200:  # upstream returns "" at once
                    return said + "no wait"
            time.sleep(wait)
            return said + f"waited {wait:g} s"

        super().__init__(tools=[execute, failed_call], parser=PromptAgentParser(
            settings.action_space, settings.observation_type, rules["failed_call"]["resend_code"]))

    def system_prompt(self, task: Task) -> str | None:
        return self.system_message + self.texts["task_suffix"].format(task.objective)

    def init_state(self, task: Task) -> AgentState:
        return AgentState(scratch={"history": []})  # [{screenshot, accessibility_tree, thought}]

    def _image(self, b64: str) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": self.texts["image_url_prefix"] + b64, **self.texts["image_extra"]}}

    def _user(self, kind: str, entry: dict[str, Any]) -> dict[str, Any]:
        kind_texts = self.texts[kind][self.settings.observation_type]
        text = kind_texts["text"].format(entry["accessibility_tree"]) if kind_texts["format"] else kind_texts["text"]
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if self.settings.observation_type != "a11y_tree":
            content.append(self._image(entry["screenshot"]))
        return {"role": "user", "content": content}

    def _current(self) -> tuple[dict[str, Any], list[list[int]]]:
        """The env's observation as `predict` stores it (base64 screenshot, trimmed tree) and the som marks."""
        obs, kind, texts = self.env.observation, self.settings.observation_type, self.texts
        shot = None if obs is None else obs.screenshot
        tree_xml = None if obs is None else obs.accessibility_tree
        masks: list[list[int]] = []
        tree: str | None = None
        if kind == "som":
            if shot is None:
                raise UpstreamEpisodeError("the observation has no screenshot (upstream's tag_screenshot fails here)")
            masks, shot, tree = tag_screenshot(shot, tree_xml, texts)
        elif kind in ("a11y_tree", "screenshot_a11y_tree"):
            tree = linearize(tree_xml, texts)
        if tree:
            tree = trim(tree, self.settings.a11y_tree_max_tokens, texts["trim_mark"])
        if kind != "a11y_tree" and shot is None:
            raise UpstreamEpisodeError("the observation has no screenshot (upstream's encode_image fails here)")
        b64 = base64.b64encode(shot).decode("utf-8") if kind != "a11y_tree" else None
        return {"screenshot": b64, "accessibility_tree": tree}, masks

    def prepare(self, task: Task, state: AgentState) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": [{"type": "text", "text": self.system_prompt(task)}]}]
        history = state.scratch["history"]
        window = self.settings.max_trajectory_length
        shown = history if len(history) <= window else (history[-window:] if window else [])
        for entry in shown:
            thought = entry["thought"]
            messages.append(self._user("history", entry))
            messages.append({"role": "assistant", "content": [
                {"type": "text", "text": thought.strip() if len(thought) > 0 else self.texts["no_thought"]}]})
        current, masks = self._current()
        state.scratch["current"] = current
        self.parser.masks = masks  # type: ignore[attr-defined]
        messages.append(self._user("current", current))
        self._sent = messages
        return messages

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        parse = outcome.parse
        # upstream's predict keeps call_llm's answer as the thought, or "" where its parser raised a ValueError
        thought = self.parser.reply if parse is not None and parse.ok else ""  # type: ignore[attr-defined]
        state.scratch["history"].append({**state.scratch.pop("current", {}), "thought": thought})
        if self._refused:
            raise UpstreamEpisodeError(f"upstream's DesktopEnv.step raises on this action ({self._refused}); its "
                                       "episode ends here without a result")
        if parse is not None and not parse.ok:
            raise UpstreamEpisodeError(f"upstream's run loop cannot run this reply ({'; '.join(parse.diagnostics)}); "
                                       "its episode ends here without a result")
        return state


def settings_from(options: dict[str, Any]) -> PromptAgentSettings:
    """The run's options (declared in `qitos.benchmark.osworld.options`), resolved and checked."""
    from qitos.benchmark.options import resolve_options
    from qitos.benchmark.osworld.options import OsworldOptions

    values = resolve_options(OsworldOptions, options, "osworld")
    return PromptAgentSettings(**{k: values[k] for k in PromptAgentSettings.__dataclass_fields__})


def build_prompt_agent(ctx: "RecipeContext") -> PromptAgent:
    env = ctx.runtime.env
    if env is None:
        raise ValueError("the prompt-agent recipe needs the desktop environment prepared by the osworld adapter")
    return PromptAgent(env, settings_from(ctx.options), ctx.make_model(None))

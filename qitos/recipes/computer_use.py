"""Computer-use baselines: `react-computer-use` (a model picks one computer_13 action per step) and `oracle`.

Toolset (`computer_13_v1`): a single `computer` tool whose arguments are one OSWorld computer_13 action
(`{"action_type": "CLICK", "x": 10, "y": 20}`). One tool rather than sixteen so that every action the model
names, including a misspelt type or a wrong argument, reaches the environment's validator: the rejection is
recorded there and counted as `action_selection` in the failure taxonomy, instead of vanishing as an
"unknown tool" error the environment never saw.

Reply format (parser `computer13_json_v1`): `{"thought": "...", "action": {"name": "CLICK", "arguments":
{"x": 10, "y": 20}}}` (json_decision_v1's shape, the action type as the name), OSWorld's own
`{"action_type": ..., "parameters": {...}}`, or a bare `DONE` / `FAIL` / `WAIT`. DONE and FAIL are actions
sent to the environment (the episode ends with stop reason `env_terminal`), never a final answer.

Each step the model sees one fresh user message: the instruction, the last few actions and their results,
the window/widget list with bounds, the pointer, and a note that a screenshot was taken. The PNG itself is
attached as an OpenAI `image_url` part only with `--option vision=1`: the embedded local model reads text only.
The agent works with any environment offering the `ComputerEnv` members (the desktop starter's
`DesktopEngineEnv` does).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any, Protocol

from qitos.benchmark.desktop.actions import ACTION_TYPES
from qitos.core.agent import AgentModule, AgentState, StepOutcome
from qitos.core.decision import Action, Decision
from qitos.core.parsers import Parser, ParseResult
from qitos.core.task import Task
from qitos.core.tools import Tool
from qitos.models.base import ModelResponse

ACTION_HELP: dict[str, str] = {  # "name args: what it does"; `?` marks an optional argument
    "MOVE_TO": "x, y: move the pointer",
    "CLICK": "x?, y?, button? (left|right|middle), num_clicks? (1-3): click; no x, y = where the pointer is",
    "MOUSE_DOWN": "button?: press and hold a mouse button",
    "MOUSE_UP": "button?: release it",
    "RIGHT_CLICK": "x?, y?: right-click",
    "DOUBLE_CLICK": "x?, y?: double-click",
    "DRAG_TO": "x, y: hold the left button from the pointer to (x, y)",
    "SCROLL": "dx, dy: wheel clicks; dy > 0 scrolls up",
    "TYPING": "text: type into the focused widget",
    "PRESS": 'key: one key, e.g. "enter", "tab"',
    "KEY_DOWN": "key: hold a key down",
    "KEY_UP": "key: release it",
    "HOTKEY": 'keys: a key combination, e.g. ["ctrl", "c"]',
    "WAIT": "(none): wait for the screen to change",
    "FAIL": "(none): the task cannot be done in this application",
    "DONE": "(none): the task is finished",
}
HISTORY_STEPS = 6
_TRUE = {"1", "true", "yes", "on"}


class ComputerEnv(Protocol):
    """What the computer-use agents need from an environment (implemented by `DesktopEngineEnv`)."""

    observation: Any  # .widgets_text, .pointer (x, y), .error

    @property
    def screenshot_path(self) -> Path | None: ...
    @property
    def steps_used(self) -> int: ...
    @property
    def max_steps(self) -> int: ...
    def act(self, raw: Any) -> Any: ...
    def note_parse_error(self, message: str) -> Any: ...
    def oracle_actions(self, gold: Any) -> list[Any]: ...


# -- the tool --------------------------------------------------------------------------------------------------
def computer_tool(env: ComputerEnv) -> Tool:
    """The `computer` tool: runs one computer_13 action; a rejected action raises (the tool call is an error)."""

    def run(**arguments: Any) -> str:
        obs = env.act(arguments)
        pointer = f"pointer at ({obs.pointer.x}, {obs.pointer.y})" if obs.pointer else "pointer unknown"
        return f"{arguments.get('action_type')} done; {pointer}" + ("; the episode is over" if obs.done else "")

    buttons = {"enum": ["left", "right", "middle"]}
    schema = {
        "type": "object",
        "properties": {
            "action_type": {"enum": list(ACTION_TYPES), "description": "the computer_13 action"},
            "x": {"type": "integer", "description": "screen x in pixels (0 = left edge)"},
            "y": {"type": "integer", "description": "screen y in pixels (0 = top edge)"},
            "button": buttons, "num_clicks": {"enum": [1, 2, 3]},
            "dx": {"type": "integer"}, "dy": {"type": "integer"},
            "text": {"type": "string"}, "key": {"type": "string"},
            "keys": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["action_type"],
        # Unknown arguments pass through so the environment rejects and records them (action_selection).
        "additionalProperties": True,
    }
    return Tool("computer", "Run one computer_13 action on the desktop (OSWorld names and arguments).", schema,
                run, read_only=False, origin="qitos.recipes.computer_use")


# -- the parser ------------------------------------------------------------------------------------------------
_BARE = re.compile(r"^[\s`'\"*.!]*(DONE|FAIL|WAIT)[\s`'\"*.!]*$", re.I)
_REPAIR = ('Reply with one JSON object: {"thought": "...", "action": {"name": "CLICK", "arguments": {"x": 100, '
           '"y": 200}}}, or just DONE when the task is finished (FAIL if it cannot be done).')


def _failure(diagnostic: str, repair: str = _REPAIR) -> ParseResult:
    return ParseResult(ok=False, diagnostics=[diagnostic], repair=repair)


class Computer13Parser(Parser):
    """A reply → one `computer` action carrying a computer_13 action; the environment validates the rest."""

    name = "computer13_json_v1"
    protocol = "computer13_json_v1"

    def format_instructions(self, tool_names: list[str]) -> str:
        return ('Reply with one JSON object and nothing else: {"thought": "<short reasoning>", "action": '
                '{"name": "<ACTION_TYPE>", "arguments": {...}}}. You may reply with just DONE or FAIL.')

    def parse(self, response: ModelResponse) -> ParseResult:
        text = (response.text or "").strip()
        if not text:
            return _failure("empty reply")
        bare = _BARE.match(text)
        if bare:
            return _act({"action_type": bare.group(1).upper()}, None)
        start = text.find("{")
        if start < 0:
            return _failure(f"no JSON action in the reply (it starts {text[:60]!r})")
        try:
            obj, _ = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError as exc:
            return _failure(f"the reply's JSON is not valid ({exc.msg} at position {exc.pos})",
                            "Reply with one valid JSON object: double quotes, no trailing commas, no comments.")
        if not isinstance(obj, dict):
            return _failure("the reply's JSON is not an object")
        thought = obj.get("thought") if isinstance(obj.get("thought"), str) else None
        action = obj.get("action")
        if isinstance(action, str):
            return _act({"action_type": action}, thought)
        if isinstance(action, dict):
            return _from_action_object(action, thought)
        if "action_type" in obj:  # OSWorld's own form
            return _act({k: v for k, v in obj.items() if k != "thought"}, thought)
        if "final_answer" in obj:
            return _failure("a final answer is not an action here",
                            'Finish with {"action": {"name": "DONE", "arguments": {}}} (or FAIL if it cannot be done).')
        return _failure('missing "action" (an object with "name" and "arguments")')


def _from_action_object(action: dict[str, Any], thought: str | None) -> ParseResult:
    name = action.get("name", action.get("action_type"))
    arguments = action.get("arguments", action.get("parameters", {}))
    if not isinstance(name, str):
        return _failure('"action" needs a string "name" (the action type, e.g. "CLICK")')
    if not isinstance(arguments, dict):
        return _failure('"action.arguments" is not a JSON object')
    if name.lower() == "computer" and "action_type" in arguments:  # the tool's own name, action inside
        return _act(dict(arguments), thought)
    return _act({**arguments, "action_type": name}, thought)


def _act(arguments: dict[str, Any], thought: str | None) -> ParseResult:
    kind = arguments.get("action_type")
    if isinstance(kind, str) and kind.strip().upper() in ACTION_TYPES:
        arguments["action_type"] = kind.strip().upper()
    return ParseResult(ok=True, decision=Decision(mode="act", actions=[Action(name="computer", arguments=arguments)],
                                                  rationale=thought))


# -- the agents ------------------------------------------------------------------------------------------------
SYSTEM_PROMPT = (
    "You operate a Linux desktop with mouse and keyboard to do the user's task. Each turn you get the task, your "
    "previous actions and the windows and widgets on screen with bounds (x, y = top-left corner, w, h = size, in "
    "pixels). To click a widget, click the centre of its bounds: x + w/2, y + h/2. To replace a field's text, "
    'click it, HOTKEY ["ctrl", "a"], then TYPING.\n\nActions (OSWorld computer_13) and arguments (? = optional):\n'
    + "\n".join(f"- {name} {ACTION_HELP[name]}" for name in ACTION_TYPES)
    + "\n\nReply with exactly one action as one JSON object and nothing else, e.g.\n"
    '{"thought": "Apply spans x=500..580, y=300..330", "action": {"name": "CLICK", "arguments": {"x": 540, "y": 315}}}'
    "\nWhen the task is finished reply DONE; if it cannot be done in this application reply FAIL."
)


class ComputerUseAgent(AgentModule):
    """One fresh prompt per step (task, recent actions, current screen) and one computer_13 action back."""

    name = "computer-use"
    toolset_name = "computer_13_v1"

    def __init__(self, env: ComputerEnv, *, vision: bool = False, history_steps: int = HISTORY_STEPS) -> None:
        super().__init__(tools=[computer_tool(env)], parser=Computer13Parser(), system_prompt=SYSTEM_PROMPT)
        self.env, self.vision, self.history_steps = env, vision, history_steps

    def system_prompt(self, task: Task) -> str | None:
        return SYSTEM_PROMPT

    def init_state(self, task: Task) -> AgentState:
        return AgentState(scratch={"history": []})

    def prepare(self, task: Task, state: AgentState) -> list[dict[str, Any]]:
        text = self.observation_text(task, state)
        content: Any = text
        shot = self.env.screenshot_path
        if self.vision and shot is not None and shot.is_file():
            data = base64.b64encode(shot.read_bytes()).decode()
            content = [{"type": "text", "text": text},
                       {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}]
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]

    def observation_text(self, task: Task, state: AgentState) -> str:
        obs, env = self.env.observation, self.env
        lines = [f"Task: {task.objective}", f"Step {env.steps_used + 1} of at most {env.max_steps}."]
        history = state.scratch.get("history", [])[-self.history_steps:]
        if history:
            lines += ["Previous steps:"] + [f"  {h}" for h in history]
        repair = state.scratch.get("repair")
        if repair:
            lines.append(repair)
        shot = env.screenshot_path
        taken = f"A screenshot of the screen was just taken ({shot.name})" if shot else "No screenshot is available"
        seen = " and is attached." if self.vision and shot else "; you cannot see it, so use the widget list below."
        lines += ["", f"Screen now. {taken}{seen}", obs.widgets_text]
        if obs.pointer is not None:
            lines.append(f"Pointer at ({obs.pointer.x}, {obs.pointer.y}).")
        if obs.error and not repair:  # after an unusable reply the repair line already says what went wrong
            lines.append(f"Your last action was rejected: {obs.error}")
        lines += ["", "Reply with one JSON action (or DONE / FAIL)."]
        return "\n".join(lines)

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        history: list[str] = state.scratch.setdefault("history", [])
        if outcome.parse is not None and not outcome.parse.ok:
            detail = "; ".join(outcome.parse.diagnostics)
            self.env.note_parse_error(detail)
            history.append(f"{outcome.step_id}. (reply not understood: {detail})")
            state.scratch["repair"] = f"Your last reply could not be used: {detail}. {outcome.parse.repair or ''}"
            return state
        state.scratch.pop("repair", None)
        if outcome.decision is not None and outcome.decision.mode == "final":
            state.final_answer = outcome.decision.final_answer
        for result in outcome.results:
            args = {k: v for k, v in result.arguments.items() if k != "action_type"}
            what = str(result.arguments.get("action_type", result.name))
            if args:
                what += " " + json.dumps(args, ensure_ascii=False)
            verdict = "ok" if result.status == "ok" else f"rejected ({result.error})"
            history.append(f"{outcome.step_id}. {what} -> {verdict}")
        return state


class OracleComputerAgent(ComputerUseAgent):
    """Plays the environment's reference actions through the same `computer` tool; never calls the model."""

    name = "computer-use-oracle"
    gold: Any = None  # the task with its reference actions (RecipeContext.oracle_gold)

    def decide(self, task: Task, state: AgentState) -> Decision | None:
        plan = state.scratch.get("plan")
        if plan is None:
            plan = [a.to_osworld() for a in self.env.oracle_actions(self.gold)]
            state.scratch["plan"] = plan
        if not plan:
            return Decision.final("oracle plan finished")
        step = plan.pop(0)
        return Decision.act("computer", {"action_type": step["action_type"], **step["parameters"]},
                            rationale="oracle reference action")


def _env(ctx: Any) -> ComputerEnv:
    env = ctx.runtime.env
    if env is None or not callable(getattr(env, "act", None)):
        raise TypeError("the computer-use recipes need a computer environment (e.g. --benchmark desktop); "
                        f"this runtime has {type(env).__name__}")
    return env


def build_react_computer_use(ctx: Any) -> AgentModule:
    """`react-computer-use`; `--option vision=1` attaches each screenshot for a multimodal model."""
    vision = str(ctx.options.get("vision", "")).strip().lower() in _TRUE
    return ComputerUseAgent(_env(ctx), vision=vision)


def build_oracle_agent(ctx: Any) -> AgentModule:
    agent = OracleComputerAgent(_env(ctx))
    agent.gold = ctx.oracle_gold()  # the task with its reference actions, through the oracle channel
    return agent

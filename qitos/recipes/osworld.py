"""QitOS's own computer-use agents for OSWorld (upstream's PromptAgent is `osworld_prompt_agent.py`, the default):
see the screen, send one computer_13 action per step, end with DONE/FAIL.

`react-computer-use` (official, not upstream; it always sends computer_13, whatever `action_space` says): the model gets the instruction, then after every action a screenshot (as an
image part, OpenAI-compatible `image_url`) and the linearized accessibility tree, and answers with one
json_decision object whose action is the `computer` tool. `scripted-actions` (not official, for tests and
demos): each model reply is a bare computer_13 action (`{"action_type": ...}`) or WAIT/DONE/FAIL, so a
`scripted:<jsonl>` model replays a fixed action sequence through the real environment and scorer.

Recipe options (`--option KEY=VALUE`): `observation_type` (read by the adapter: a11y_tree (default),
screenshot_a11y_tree, screenshot), `history` (observations kept in full, default 3; older
screenshots and trees are replaced by a one-line note to bound the context), `a11y_max_chars` (default 12000).
"""

from __future__ import annotations

import base64
import json
import struct
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any, Literal

from qitos.core.agent import AgentModule, AgentState, StepOutcome
from qitos.core.decision import Action, Decision
from qitos.core.parsers import JsonDecisionParser, Parser, ParseResult, repair_note
from qitos.core.task import Task
from qitos.core.tools import tool
from qitos.models.base import ModelResponse

if TYPE_CHECKING:
    from qitos.benchmark.base import RecipeContext

ActionType = Literal[
    "MOVE_TO", "CLICK", "MOUSE_DOWN", "MOUSE_UP", "RIGHT_CLICK", "DOUBLE_CLICK", "DRAG_TO", "SCROLL",
    "TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY", "WAIT", "FAIL", "DONE",
]
SPECIAL = ("WAIT", "DONE", "FAIL")

SYSTEM_PROMPT = """You control an Ubuntu desktop to complete the user's task. Each step you see the screen \
(a screenshot and/or the accessibility tree: tag, name, text, position of the top-left corner, size) and \
send exactly one action through the `computer` tool.

Actions (`action_type` and its `parameters`), coordinates in screen pixels:
MOVE_TO {x, y} · CLICK {x?, y?, button?: left|right|middle, num_clicks?} · MOUSE_DOWN {button?} · \
MOUSE_UP {button?} · RIGHT_CLICK {x?, y?} · DOUBLE_CLICK {x?, y?} · DRAG_TO {x, y} · SCROLL {dx?, dy?} \
(integers; dy > 0 scrolls up) · TYPING {text} · PRESS {key} · KEY_DOWN {key} · KEY_UP {key} · \
HOTKEY {keys: [..]} · WAIT {} · DONE {} · FAIL {}.

Send DONE once the task is complete, and FAIL if the task cannot be done on this computer (for example, \
it asks for something impossible); both end the episode. The password of the user, if asked, is 'password'."""

JSON_FORMAT = (
    'Reply with one JSON object and nothing else: {"thought": "...", "action": {"name": "computer", '
    '"arguments": {"action_type": "CLICK", "parameters": {"x": 100, "y": 200}}}}. A "final_answer" instead of '
    "an action ends the episode like DONE (or like FAIL when the answer is exactly FAIL)."
)


# -- perception ------------------------------------------------------------------------------------
def _local(name: str) -> str:
    """`{namespace}showing` or `st:showing` → `showing`."""
    return name.rsplit("}", 1)[-1].rsplit(":", 1)[-1]


def linearize_a11y_tree(xml_text: str | None, max_chars: int = 12000) -> str:
    """One tab-separated row per visible, named node: tag, name, text, position, size.

    Nodes marked not showing/visible, or with neither name nor text, are dropped; the result is cut at
    `max_chars` with a note. Text that is not XML is passed through (cut the same way).
    """
    if not xml_text:
        return "(no accessibility tree)"
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return _cut(xml_text, max_chars)
    rows = ["tag\tname\ttext\tposition\tsize"]
    for node in root.iter():
        attrs = {_local(k): v for k, v in node.attrib.items()}
        if attrs.get("showing") == "false" or attrs.get("visible") == "false":
            continue
        name = (attrs.get("name") or "").strip()
        text = " ".join((node.text or "").split())
        if not name and not text:
            continue
        rows.append("\t".join([_local(node.tag), name, text[:200], attrs.get("screencoord", ""), attrs.get("size", "")]))
    return _cut("\n".join(rows), max_chars)


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... cut: {len(text) - max_chars} more characters]"


def png_size(data: bytes | None) -> tuple[int, int] | None:
    """(width, height) from a PNG header, or None when the bytes are not a PNG."""
    if not data or len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", data[16:24])


# -- parsing ---------------------------------------------------------------------------------------
class ComputerActionParser(Parser):
    """A reply that is one bare action: a computer_13 JSON object, or WAIT / DONE / FAIL."""

    name = "osworld_action_v1"
    protocol = "osworld_action_v1"

    def format_instructions(self, tool_names: list[str]) -> str:
        return ('Reply with one action only: a JSON object {"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}, '
                "or one of WAIT, DONE, FAIL.")

    def parse(self, response: ModelResponse) -> ParseResult:
        text = (response.text or "").strip().strip("`").strip()
        if text.upper() in SPECIAL:
            return ParseResult(ok=True, decision=_computer({"action_type": text.upper()}))
        start, end = text.find("{"), text.rfind("}")
        try:
            obj = json.loads(text[start : end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError as exc:
            obj = exc
        if not isinstance(obj, dict) or not isinstance(obj.get("action_type"), str):
            return ParseResult(ok=False, diagnostics=[f"not a computer_13 action: {text[:200]!r}"],
                               repair='Reply with {"action_type": ..., "parameters": {...}} or WAIT, DONE, FAIL.')
        return ParseResult(ok=True, decision=_computer(obj))


def _computer(obj: dict[str, Any]) -> Decision:
    arguments = {"action_type": obj["action_type"], "parameters": obj.get("parameters") or {}}
    return Decision(mode="act", actions=[Action(name="computer", arguments=arguments)])


# -- the agent -------------------------------------------------------------------------------------
class ComputerUseAgent(AgentModule):
    """Chat memory where each observation is an image message followed by a text message; only the last
    `history` observations keep their screenshot and tree (older ones shrink to their first line)."""

    name = "osworld-computer-use"
    toolset_name = "osworld_computer13_v1"

    def __init__(self, env: Any, parser: Parser, *, history: int = 3, a11y_max_chars: int = 12000) -> None:
        self.env = env
        self.history = history
        self.a11y_max_chars = a11y_max_chars

        @tool
        def computer(action_type: ActionType, parameters: dict[str, Any] | None = None) -> str:
            """Perform one computer_13 action on the desktop (DONE or FAIL ends the episode).

            Args:
                action_type: the action, e.g. CLICK, TYPING, HOTKEY, DONE, FAIL
                parameters: the action's parameters, e.g. {"x": 100, "y": 200} or {"text": "hello"}
            """
            if action_type in SPECIAL:  # the protocol's own strings: upstream ends and scores only on "DONE"/"FAIL"
                return env.step(action_type)
            return env.step({"action_type": action_type, "parameters": parameters or {}})

        super().__init__(tools=[computer], parser=parser, system_prompt=SYSTEM_PROMPT)

    def system_prompt(self, task: Task) -> str | None:
        fmt = JSON_FORMAT if isinstance(self.parser, JsonDecisionParser) else self.parser.format_instructions(self.tools.names())
        return f"{SYSTEM_PROMPT}\n\n{fmt}"

    def task_prompt(self, task: Task) -> str:
        obs = self.env.observation
        size = png_size(obs.screenshot) if obs is not None else None
        screen = f" The screen is {size[0]}x{size[1]} pixels." if size else ""
        return f"Task: {task.objective}{screen}"

    def init_state(self, task: Task) -> AgentState:
        state = AgentState(messages=[{"role": "user", "content": self.task_prompt(task)}])
        self._observe(state, "Initial observation.")
        return state

    def reduce(self, task: Task, state: AgentState, outcome: StepOutcome) -> AgentState:
        if outcome.response is not None:
            state.messages.append({"role": "assistant", "content": outcome.response.text or ""})
        if outcome.parse is not None and not outcome.parse.ok:
            state.messages.append({"role": "user", "content": repair_note(outcome.parse)})
            return state
        if outcome.decision is not None and outcome.decision.mode == "final":
            state.final_answer = outcome.decision.final_answer
            return state
        header = " ".join(r.observation_text() for r in outcome.results) or "No action was taken."
        if not self._observe(state, header):
            state.messages.append({"role": "user", "content": f"Observation: {header}"})
        return state

    def _observe(self, state: AgentState, header: str) -> bool:
        """Append the env's newest observation (if not yet shown); False when there is none."""
        obs = self.env.observation
        seen = state.scratch.setdefault("observations", [])
        if obs is None or (seen and seen[-1]["step"] >= obs.step):
            return False
        kind = self.env.observation_type
        entry: dict[str, Any] = {"step": obs.step, "image": None}
        if kind != "a11y_tree" and obs.screenshot:
            entry["image"] = len(state.messages)
            url = "data:image/png;base64," + base64.b64encode(obs.screenshot).decode()
            state.messages.append({"role": "user", "content": [
                {"type": "text", "text": f"Screenshot after step {obs.step}:"},
                {"type": "image_url", "image_url": {"url": url}}]})
        brief = f"Observation after step {obs.step}: {header}"
        text = brief + (f"\nNote: {obs.error}" if obs.error else "")
        if kind != "screenshot":
            text += "\nAccessibility tree:\n" + linearize_a11y_tree(obs.accessibility_tree, self.a11y_max_chars)
        entry.update(text=len(state.messages), brief=brief)
        state.messages.append({"role": "user", "content": text})
        seen.append(entry)
        return True

    def prepare(self, task: Task, state: AgentState) -> list[dict[str, Any]]:
        messages = list(state.messages)
        observations = state.scratch.get("observations", [])
        for entry in observations[: max(0, len(observations) - self.history)]:
            if entry["image"] is not None:
                messages[entry["image"]] = {"role": "user", "content": f"[screenshot after step {entry['step']} omitted]"}
            messages[entry["text"]] = {"role": "user", "content": entry["brief"] + " [details omitted]"}
        system = self.system_prompt(task)
        return ([{"role": "system", "content": system}] if system else []) + messages


# -- recipes ---------------------------------------------------------------------------------------
def _int_option(options: dict[str, Any], key: str, default: int, minimum: int) -> int:
    raw = options.get(key, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"--option {key}={raw!r}: expected an integer") from None
    if value < minimum:
        raise ValueError(f"--option {key}={value}: must be at least {minimum}")
    return value


def agent_options(options: dict[str, Any]) -> dict[str, int]:
    """The recipe's `--option`s, validated (ValueError names the option and what is allowed)."""
    return {"history": _int_option(options, "history", 3, 1),
            "a11y_max_chars": _int_option(options, "a11y_max_chars", 12000, 200)}


def _build(ctx: "RecipeContext", parser: Parser) -> ComputerUseAgent:
    env = ctx.runtime.env
    if env is None:
        raise ValueError("the OSWorld computer-use recipes need the desktop environment prepared by the osworld adapter")
    if env.observation_type == "som":
        raise ValueError("--option observation_type=som: react-computer-use sees screenshot, a11y_tree or "
                         "screenshot_a11y_tree (som is for --recipe prompt-agent)")
    return ComputerUseAgent(env, parser, **agent_options(ctx.options))


def build_react_computer_use(ctx: "RecipeContext") -> ComputerUseAgent:
    return _build(ctx, JsonDecisionParser())


def build_scripted_actions(ctx: "RecipeContext") -> ComputerUseAgent:
    return _build(ctx, ComputerActionParser())

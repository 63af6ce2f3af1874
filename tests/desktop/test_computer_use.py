"""The computer-use recipe without a desktop: reply parsing, the prompt the model sees, and parse-error bookkeeping."""

from __future__ import annotations

import base64
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from qitos.benchmark.desktop.actions import ACTION_TYPES, Pointer
from qitos.core.agent import StepOutcome
from qitos.core.task import Task
from qitos.models.base import ModelResponse
from qitos.recipes.computer_use import (ACTION_HELP, Computer13Parser, ComputerUseAgent, build_oracle_agent,
                                        build_react_computer_use)

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def parse(text: str) -> dict[str, Any] | None:
    result = Computer13Parser().parse(ModelResponse(text=text))
    if not result.ok:
        return None
    assert result.decision is not None and result.decision.mode == "act"
    (action,) = result.decision.actions
    assert action.name == "computer"
    return action.arguments


def test_every_action_type_is_documented_for_the_model() -> None:
    assert tuple(ACTION_HELP) == ACTION_TYPES


@pytest.mark.parametrize("text, expected", [
    ('{"thought": "apply is there", "action": {"name": "CLICK", "arguments": {"x": 10, "y": 20}}}',
     {"action_type": "CLICK", "x": 10, "y": 20}),
    ('Sure!\n```json\n{"action": {"name": "typing", "arguments": {"text": "hi"}}}\n```',
     {"action_type": "TYPING", "text": "hi"}),
    ('{"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "a"]}}',
     {"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "a"]}}),
    ('{"thought": "finished", "action": "DONE"}', {"action_type": "DONE"}),
    ('{"action": {"name": "computer", "arguments": {"action_type": "PRESS", "key": "enter"}}}',
     {"action_type": "PRESS", "key": "enter"}),
    ("DONE", {"action_type": "DONE"}),
    ("  fail. ", {"action_type": "FAIL"}),
    ("`WAIT`", {"action_type": "WAIT"}),
    ('{"action": {"name": "MOVE_TO", "arguments": {"x": 1, "y": 2}}} {"action": {"name": "DONE"}}',
     {"action_type": "MOVE_TO", "x": 1, "y": 2}),
    # an unknown type still reaches the environment, which rejects and records it (action_selection)
    ('{"action": {"name": "SWIPE", "arguments": {}}}', {"action_type": "SWIPE"}),
])
def test_replies_become_one_computer_action(text: str, expected: dict[str, Any]) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("text, diagnostic", [
    ("", "empty reply"),
    ("The task is done.", "no JSON action"),
    ('{"action": {"name": "CLICK", "arguments": {"x": 1,}}}', "not valid"),
    ('{"thought": "ok", "final_answer": "done"}', "final answer is not an action"),
    ('{"action": {"arguments": {"x": 1}}}', 'string "name"'),
    ("[1, 2]", "no JSON action"),
])
def test_unusable_replies_say_what_is_wrong_and_how_to_fix_it(text: str, diagnostic: str) -> None:
    result = Computer13Parser().parse(ModelResponse(text=text))
    assert not result.ok and diagnostic in result.diagnostics[0] and result.repair


class FakeEnv:
    """Just enough of DesktopEngineEnv for the agent's prompt and bookkeeping."""

    def __init__(self, shot: Path) -> None:
        self.observation = SimpleNamespace(widgets_text='window "Dialog" name=main\n  [button] "Apply" name=apply',
                                           pointer=Pointer(x=5, y=6), error=None, done=False)
        self.screenshot_path: Path | None = shot
        self.steps_used, self.max_steps = 0, 5
        self.parse_errors: list[str] = []

    def act(self, raw: Any) -> Any:
        self.steps_used += 1
        return self.observation

    def note_parse_error(self, message: str) -> Any:
        self.parse_errors.append(message)
        self.steps_used += 1
        return self.observation

    def oracle_actions(self) -> list[Any]:
        return []


def _ctx(env: Any, **options: str) -> Any:
    return SimpleNamespace(runtime=SimpleNamespace(env=env), options=options)


TASK = Task(id="click-apply", objective="Click the 'Apply' button.")


def test_prompt_holds_instruction_widgets_and_screenshot_note(tmp_path: Path) -> None:
    shot = tmp_path / "step_000.png"
    shot.write_bytes(PNG)
    agent = build_react_computer_use(_ctx(FakeEnv(shot)))
    system, user = agent.prepare(TASK, agent.init_state(TASK))
    assert system["role"] == "system" and "DRAG_TO" in system["content"] and "DONE" in system["content"]
    text = user["content"]
    assert isinstance(text, str), "a text-only model must get plain text"
    assert "Click the 'Apply' button." in text and '[button] "Apply" name=apply' in text
    assert "screenshot" in text and "step_000.png" in text and "cannot see it" in text
    assert "Pointer at (5, 6)" in text and "Step 1 of at most 5" in text


def test_vision_option_attaches_the_png_as_an_image_part(tmp_path: Path) -> None:
    shot = tmp_path / "step_000.png"
    shot.write_bytes(PNG)
    agent = build_react_computer_use(_ctx(FakeEnv(shot), vision="1"))
    _, user = agent.prepare(TASK, agent.init_state(TASK))
    text_part, image_part = user["content"]
    assert text_part["type"] == "text" and "is attached" in text_part["text"]
    assert image_part["type"] == "image_url"
    url = image_part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == PNG


def test_unparseable_reply_is_recorded_as_a_step_and_explained_next_turn(tmp_path: Path) -> None:
    env = FakeEnv(tmp_path / "missing.png")
    agent = build_react_computer_use(_ctx(env))
    state = agent.init_state(TASK)
    response = ModelResponse(text="I think the task is done")
    outcome = StepOutcome(step_id=1, response=response, parse=agent.parser.parse(response))
    state = agent.reduce(TASK, state, outcome)
    assert env.parse_errors and "no JSON action" in env.parse_errors[0]
    _, user = agent.prepare(TASK, state)
    assert "could not be used" in user["content"] and "reply not understood" in user["content"]


def test_recipes_refuse_an_environment_that_is_not_a_computer() -> None:
    for build in (build_react_computer_use, build_oracle_agent):
        with pytest.raises(TypeError, match="--benchmark desktop"):
            build(_ctx(None))

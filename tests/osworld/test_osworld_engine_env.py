"""OsworldEnv against the fake controller, and the computer-use recipe driving it through the real Engine."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from osworld_fake_controller import FakeController, png_bytes

from qitos.benchmark.osworld import ControllerClient, ControllerError, ControllerProvider, ExecuteResult, OSWorldTask
from qitos.benchmark.osworld.adapter import to_task
from qitos.benchmark.osworld.engine_env import ActionRejected, OsworldEnv
from qitos.core.engine import Engine
from qitos.core.stop import StopReason
from qitos.models.base import ModelResponse
from qitos.models.scripted import ScriptedModel
from qitos.recipes.osworld import (
    ComputerActionParser,
    build_react_computer_use,
    build_scripted_actions,
    linearize_a11y_tree,
    png_size,
)

TASK = OSWorldTask.model_validate({"id": "t1", "domain": "os", "snapshot": "os", "instruction": "Turn the thing off",
                                   "evaluator": {"func": "infeasible"}})


@pytest.fixture
def fake():
    with FakeController() as controller:
        yield controller


@pytest.fixture
def provider(fake):
    p = ControllerProvider(ControllerClient(fake.url, timeout=5), sleep=lambda s: None)
    yield p
    p.close()


def make_env(provider, **kwargs: Any) -> tuple[OsworldEnv, list[float]]:
    sleeps: list[float] = []
    return OsworldEnv(TASK, provider, sleep=sleeps.append, **kwargs), sleeps


def test_env_observes_acts_and_ends_on_done(fake, provider, tmp_path: Path) -> None:
    env, sleeps = make_env(provider, settle_seconds=0.5)
    events: list[tuple[str, dict]] = []
    env.bind_events(lambda kind, payload: events.append((kind, payload)))
    first = env.reset()
    assert first.screenshot == png_bytes() and first.accessibility_tree == "<desktop-frame name='main'/>"
    assert env.take_visual_assets(tmp_path) == [{"kind": "screenshot", "path": "screens/step_000.png", "mime_type": "image/png"}]
    assert (tmp_path / "screens" / "step_000.png").read_bytes() == png_bytes()
    assert env.take_visual_assets(tmp_path) == []

    assert env.step({"action_type": "CLICK", "parameters": {"x": 5, "y": 7}}) == "CLICK(x=5, y=7) executed."
    code = fake.calls("/execute")[-1]["command"][2]
    assert "pyautogui.click(x=5, y=7, button='left', clicks=1)" in code
    assert sleeps == [0.5] and not env.is_terminal()
    assert env.step_summary()["kind"] == "CLICK" and env.step_summary() is None  # handed out once
    assert events[-1][0] == "env_step" and events[-1][1]["command"][2] == code

    with pytest.raises(ActionRejected, match="invalid action: .*CLICK needs numeric parameter 'y'"):
        env.step({"action_type": "CLICK", "parameters": {"x": 5}})
    with pytest.raises(ActionRejected, match="invalid action"):
        env.step({"action_type": "JUMP"})
    assert len(env.actions) == 1 and len(fake.calls("/execute")) == 1

    # as upstream's DesktopEnv.step: a computer_13 dict DONE runs nothing and ends nothing; the string does end it
    assert env.step({"action_type": "DONE"}) == "DONE() executed."
    assert not env.is_terminal() and env.last_action == {"action_type": "DONE", "parameters": {}}
    assert sleeps == [0.5, 0.5] and len(fake.calls("/execute")) == 1
    assert env.step("DONE") == "DONE received: the episode is over."
    assert env.is_terminal() and env.last_action == "DONE"
    assert sleeps == [0.5, 0.5] and len(fake.calls("/execute")) == 1  # DONE runs nothing and does not wait
    with pytest.raises(ActionRejected, match="episode is over"):
        env.step({"action_type": "CLICK"})
    assert [a["path"] for a in env.take_visual_assets(tmp_path)] == [
        "screens/step_001.png", "screens/step_002.png", "screens/step_003.png"]
    env.close()
    assert env.closed and not provider.client._http.is_closed  # evaluation still needs the desktop


def test_screenshot_only_observation_skips_the_tree(fake, provider) -> None:
    env, _ = make_env(provider, observation_type="screenshot", settle_seconds=0)
    assert env.reset().accessibility_tree is None and fake.calls("/accessibility") == []
    with pytest.raises(ValueError, match="observation type 'video'"):
        OsworldEnv(TASK, provider, observation_type="video")  # type: ignore[arg-type]


class BrokenProvider:
    """A desktop whose commands fail and whose screen cannot be captured."""

    name = "broken"

    def execute_action(self, action: Any) -> ExecuteResult:
        return ExecuteResult(status="error", error="Xlib: display closed", returncode=1)

    def screenshot(self) -> bytes:
        raise ControllerError("GET /screenshot returned HTTP 500")

    def accessibility_tree(self) -> str | None:
        return None


def test_failures_in_the_vm_are_reported_to_the_agent() -> None:
    env = OsworldEnv(TASK, BrokenProvider(), settle_seconds=0)  # type: ignore[arg-type]
    assert "HTTP 500" in (env.reset().error or "")
    with pytest.raises(ActionRejected, match="PRESS\\(key='enter'\\) failed in the VM: Xlib: display closed"):
        env.step({"action_type": "PRESS", "parameters": {"key": "enter"}})
    assert env.step_summary()["ok"] is False and len(env.actions) == 1


def test_linearize_accessibility_tree() -> None:
    xml = ('<desktop-frame xmlns:st="https://a.example/ns/state" xmlns:cp="https://a.example/ns/component" name="">'
           '<push-button name="OK" st:showing="true" cp:screencoord="(10, 20)" cp:size="(80, 30)"/>'
           '<push-button name="Hidden" st:showing="false"/>'
           '<label name="">  Total:\n 42 </label><filler/></desktop-frame>')
    rows = linearize_a11y_tree(xml).splitlines()
    assert rows == ["tag\tname\ttext\tposition\tsize", "push-button\tOK\t\t(10, 20)\t(80, 30)", "label\t\tTotal: 42\t\t"]
    assert linearize_a11y_tree(xml, max_chars=40).endswith("more characters]")
    assert linearize_a11y_tree("not <xml") == "not <xml" and linearize_a11y_tree(None) == "(no accessibility tree)"
    assert png_size(png_bytes()) == (4, 3) and png_size(b"GIF89a") is None


@pytest.mark.parametrize("text, arguments", [
    ("DONE", {"action_type": "DONE", "parameters": {}}),
    (" fail ", {"action_type": "FAIL", "parameters": {}}),
    ('```json\n{"action_type": "TYPING", "parameters": {"text": "hi"}}\n```',
     {"action_type": "TYPING", "parameters": {"text": "hi"}}),
])
def test_bare_action_parser(text: str, arguments: dict) -> None:
    result = ComputerActionParser().parse(ModelResponse(text=text))
    assert result.ok and result.decision.actions[0].name == "computer"
    assert result.decision.actions[0].arguments == arguments


def test_bare_action_parser_rejects_other_text() -> None:
    result = ComputerActionParser().parse(ModelResponse(text="I will click the button"))
    assert not result.ok and "not a computer_13 action" in result.diagnostics[0] and "WAIT, DONE, FAIL" in result.repair


def decision(action_type: str, **parameters: Any) -> str:
    return json.dumps({"thought": f"now {action_type}",
                       "action": {"name": "computer", "arguments": {"action_type": action_type, "parameters": parameters}}})


def test_react_recipe_runs_through_the_engine(fake, provider, tmp_path: Path) -> None:
    env, _ = make_env(provider, settle_seconds=0)
    script = [decision("CLICK", x=3, y=4), decision("TYPING", text="abc"), decision("HOTKEY", keys=["ctrl", "s"]),
              decision("FAIL")]
    seen: list[list[dict]] = []

    def model_fn(messages: list[dict]) -> str:
        seen.append(messages)
        return script[len(seen) - 1]

    ctx = SimpleNamespace(runtime=SimpleNamespace(env=env), options={"history": "1"})
    agent = build_react_computer_use(ctx)
    result = Engine(agent, ScriptedModel(model_fn), env=env, trace_logdir=tmp_path).run(to_task(TASK, "test_all"))
    assert result.stop_reason is StopReason.ENV_TERMINAL and result.steps == 4
    system, prompt = seen[0][0]["content"], seen[0][1]["content"]
    assert "computer_13" not in prompt and "Turn the thing off" in prompt and "4x3 pixels" in prompt
    assert '"name": "computer"' in system and "FAIL" in system
    last = seen[-1]
    images = [m for m in last if isinstance(m["content"], list)]
    assert len(images) == 1 and images[0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "Screenshot after step 3" in images[0]["content"][0]["text"]
    assert "[screenshot after step 0 omitted]" in [m["content"] for m in last]
    assert last[-1]["content"].startswith("Observation after step 3: HOTKEY(keys=['ctrl', 's']) executed.")
    assert "push-button" not in last[-1]["content"] and "desktop-frame\tmain" in last[-1]["content"]
    run_dir = Path(result.run_dir)
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert [len(s["visual_assets"]) for s in steps] == [2, 1, 1, 1]
    assert all((run_dir / a["path"]).is_file() for s in steps for a in s["visual_assets"])
    assert steps[-1]["state_diff"]["terminal"] is True
    assert "base64" not in (run_dir / "events.jsonl").read_text()  # the screenshot message is never the last one
    assert [c["command"][2].rsplit("; ", 1)[-1] for c in fake.calls("/execute")] == [
        "pyautogui.click(x=3, y=4, button='left', clicks=1)", "pyautogui.typewrite('abc')", "pyautogui.hotkey('ctrl', 's')"]


def test_scripted_actions_recipe_and_text_only_observation(fake, provider, tmp_path: Path) -> None:
    env, _ = make_env(provider, observation_type="a11y_tree", settle_seconds=0)
    replies = ['{"action_type": "MOVE_TO", "parameters": {"x": 1, "y": 1}}', "oops", "DONE"]
    seen: list[list[dict]] = []

    def model_fn(messages: list[dict]) -> str:
        seen.append(messages)
        return replies[len(seen) - 1]

    agent = build_scripted_actions(SimpleNamespace(runtime=SimpleNamespace(env=env), options={}))
    result = Engine(agent, ScriptedModel(model_fn), env=env, trace_logdir=tmp_path).run(to_task(TASK, "test_all"))
    assert result.stop_reason is StopReason.ENV_TERMINAL and result.steps == 3
    assert all(isinstance(m["content"], str) for m in seen[-1])  # text-only models never get image parts
    assert "could not be parsed: not a computer_13 action" in seen[-1][-1]["content"]
    assert "Accessibility tree:" in seen[1][-1]["content"] and fake.calls("/screenshot")  # still traced
    assert env.last_action == "DONE"  # the recipe sends the protocol's string, as upstream's agent does
    assert agent.parser.name == "osworld_action_v1"
    with pytest.raises(ValueError, match="history"):
        build_scripted_actions(SimpleNamespace(runtime=SimpleNamespace(env=env), options={"history": "0"}))
    with pytest.raises(ValueError, match="desktop environment"):
        build_react_computer_use(SimpleNamespace(runtime=SimpleNamespace(env=None), options={}))


def test_run_plan_does_what_upstreams_step_does(fake, provider) -> None:
    """The prompt-agent's path: upstream's planned commands and waits, in order; a command that fails in the VM is
    noted and the step goes on; where upstream raises, nothing is observed; DONE ends the episode."""
    from qitos.benchmark.osworld.upstream_step import Plan

    env, sleeps = make_env(provider, settle_seconds=0.5)
    events: list[tuple[str, dict]] = []
    env.bind_events(lambda kind, payload: events.append((kind, payload)))
    env.reset()

    def output(command: Any, shell: bool) -> str:
        if "boom" in command[2]:
            raise RuntimeError("the VM fails")
        return ""

    fake.command_output = output
    scroll = Plan([("python", "pyautogui.hscroll(1)"), ("python", "boom()"), ("python", "pyautogui.vscroll(2)"),
                   ("sleep", 0.5)])
    said = env.run_plan({"action_type": "SCROLL", "dx": 1, "dy": 2}, scroll, "P; {command}")
    assert "failed in the VM" in said and sleeps == [0.5]
    assert [b["command"] for b in fake.calls("/execute")] == [
        ["python", "-c", "P; pyautogui.hscroll(1)"], ["python", "-c", "P; boom()"], ["python", "-c", "P; pyautogui.vscroll(2)"]]
    step = events[-1][1]
    assert step["ok"] is False and len(step["commands"]) == 3 and step["sleeps"] == [0.5] and step["raised"] is None
    seen = env.observation
    said = env.run_plan({"action_type": "MOUSE_DOWN", "x": 1}, Plan([], False, "Exception: Unknown parameters"), "{command}")
    assert said == "upstream raises: Exception: Unknown parameters" and env.observation is seen
    assert events[-1][1]["raised"] == "Exception: Unknown parameters"
    assert env.run_plan("DONE", Plan([("sleep", 0.5)], True), "{command}") == "DONE ran" and env.is_terminal()
    assert env.final_state() == {"task_id": "osworld-os-t1", "last_action": "DONE", "actions": 3, "terminal": True}
    with pytest.raises(ActionRejected, match="the episode is over"):
        env.run_plan("WAIT", Plan(), "{command}")

"""The prompt-agent recipe's pieces that the differential test does not reach: upstream's texts read from the data
dir (and a clear error when they are missing or not the pinned commit's), and the options a run refuses."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prompt_agent_desk import Desk

from qitos.benchmark.osworld.prompt_texts import PromptTextsError, load_prompt_texts
from tests.support.openai_server import Fail, OpenAIServer, Raw, Reply

REPO = Path(__file__).resolve().parents[2]
GSETTINGS = "osworld-os-bedcedc4-4d72-425e-ad62-21960b11fe0d"


def test_the_texts_are_upstreams(osworld_data: Path) -> None:
    texts = load_prompt_texts(osworld_data)
    prompts = ast.parse((osworld_data / "upstream" / "mm_agents" / "prompts.py").read_text())
    constants = {n.targets[0].id for n in prompts.body if isinstance(n, ast.Assign)}
    assert {space for choice in texts["system"].values() for space in choice} == {"pyautogui", "computer_13"}
    assert set(texts["system"]) == {"screenshot", "a11y_tree", "screenshot_a11y_tree", "som"}
    assert "computer_13" not in texts["system"]["som"]  # upstream's PromptAgent has no som prompt for it
    assert {"SYS_PROMPT_IN_A11Y_OUT_CODE", "SYS_PROMPT_IN_SOM_OUT_TAG"} <= constants
    source = (osworld_data / "upstream" / "mm_agents" / "agent.py").read_text()
    for kind in ("history", "current"):
        for phrase in texts[kind].values():
            assert json.dumps(phrase["text"])[1:-1] in source  # each phrase is upstream's, as written there
    assert texts["current"]["a11y_tree"]["format"] and not texts["history"]["som"]["format"]
    assert texts["image_extra"] == {"detail": "high"} and texts["trim_mark"].endswith("\n")
    assert {"enter", "ctrl", "pgdn"} <= set(texts["keyboard_keys"]) and "pgdown" not in texts["keyboard_keys"]


def test_missing_or_changed_upstream_files_are_named(osworld_data: Path, tmp_path: Path) -> None:
    with pytest.raises(PromptTextsError, match="not found; run `qit data fetch osworld`"):
        load_prompt_texts(tmp_path)
    copy = tmp_path / "osworld" / "upstream"
    for folder in ("mm_agents", "desktop_env"):
        shutil.copytree(osworld_data / "upstream" / folder, copy / folder)
    agent = copy / "mm_agents" / "agent.py"
    agent.write_text(agent.read_text().replace("self.system_message +", "SYSTEM +"))
    with pytest.raises(PromptTextsError, match="does not append the instruction to the system message"):
        load_prompt_texts(tmp_path / "osworld")


@pytest.mark.parametrize("options, says, extra_env", [
    (["--option", "observation_type=som", "--option", "action_space=computer_13"], "goes with action_space=pyautogui", {}),
    (["--recipe", "react-computer-use", "--option", "observation_type=som"], "som is for --recipe prompt-agent", {}),
    (["--option", "action_space=code"], "--option action_space=code", {}),
    (["--option", "max_trajectory_length=-1"], "max_trajectory_length=-1", {}),
    ([], "run `qit data fetch tokenizer`", {"QITOS_TIKTOKEN_DIR": "/nonexistent", "HOME": "/nonexistent"}),
])
def test_bad_options_are_refused(osworld_data: Path, tmp_path: Path, options: list[str], says: str,
                                 extra_env: dict[str, str]) -> None:
    (tmp_path / "s.jsonl").write_text('"DONE"\n')
    with Desk() as desk:
        env = {**os.environ, "PYTHONPATH": str(REPO), "QITOS_DATA_DIR": str(osworld_data.parent),
               "QITOS_OSWORLD_CONTROLLER": desk.url, **extra_env}
        if extra_env:  # no tokenizer anywhere
            env.pop("TIKTOKEN_CACHE_DIR", None)
        done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "--benchmark", "osworld",
                               "--task-ids", GSETTINGS, "--model-name", "scripted:s.jsonl", *options,
                               "--output", "r.jsonl"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "r.jsonl").exists()


def test_a_changed_controller_is_named(osworld_data: Path, tmp_path: Path) -> None:
    """Upstream's step and controller run on a stand-in that provides only what they use at the pinned commit."""
    copy = tmp_path / "osworld" / "upstream"
    for folder in ("mm_agents", "desktop_env"):
        shutil.copytree(osworld_data / "upstream" / folder, copy / folder)
    python = copy / "desktop_env" / "controllers" / "python.py"
    python.write_text(python.read_text().replace('move_mode = random.choice(', 'move_mode = secrets.choice('))
    with pytest.raises(PromptTextsError, match=r"execute_action\(\) uses secrets, which QitOS's stand-in"):
        load_prompt_texts(tmp_path / "osworld")


@pytest.mark.parametrize("answer, outcome", [
    (Reply(text="```python\npyautogui.click(1, 2)\n```"), ("```python\npyautogui.click(1, 2)\n```", None, "")),
    (Reply(text=None), (None, None, "null")),
    (Reply(text="", message_extra={"content": ["parts"]}), (None, None, "list")),
    (Fail(500), ("", None, "")),  # no error code: upstream's lookup of it raises, predict answers ""
    (Raw('{"error": {"code": "server_error"}}', 500, "application/json"), ("", "wait", "")),
    (Raw('{"error": {"code": null}}', 429, "application/json"), ("", "wait", "")),
    (Raw('{"error": {"code": "context_length_exceeded"}}', 400, "application/json"), ("", "resend", "")),
    (Raw("<html>502</html>", 502), ("", None, "")),
    (Raw('{"id": "x", "choices": []}', 200, "application/json"), ("", None, "")),
    (Raw("not json", 200), ("", None, "")),
    (None, ("", None, "")),  # nothing listens: upstream's requests.post raises, predict answers ""
])
def test_a_call_is_answered_as_upstreams_call_llm(answer: object, outcome: tuple) -> None:
    """One attempt, the failure as a reply (the recipe's call options), read as upstream's call_llm reads it."""
    from qitos.models.openai_compat import OpenAICompatModel
    from qitos.recipes.osworld_prompt_agent import call_outcome

    with OpenAIServer() as server:
        if answer is not None:
            server.queue.append(answer)
        base_url = server.base_url if answer is not None else "http://127.0.0.1:9/v1"
        model = OpenAICompatModel("gpt-4o", base_url=base_url, request_timeout=5)
        response = model.complete([{"role": "user", "content": "hi"}], max_retries=0, failure_reply=True)
        got = call_outcome(response, "context_length_exceeded")
        assert (got.text, got.then, got.content) == outcome
        assert len(server.requests) == (1 if answer is not None else 0)  # no retries

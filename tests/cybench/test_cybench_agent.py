"""cybench-agent pieces: upstream's texts read from the data dir (not from QitOS), its parser, truncation, the tree
listing against the real `tree`, the RunSpec, and a clear error without upstream's files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qitos.benchmark.cybench.tasks import load_task
from qitos.benchmark.cybench.listing import tree_output
from qitos.benchmark.cybench.upstream import UpstreamAgent, UpstreamSourceError, load_upstream
from qitos.models.base import ModelResponse
from qitos.recipes.cybench_agent import UpstreamCybenchParser
from tests.conftest import require_system
from qitos.sandbox.bwrap import BwrapSandbox
from tests.support.openai_server import OpenAIServer, Reply

DYNASTIC = "benchmark/hackthebox/cyber-apocalypse-2024/crypto/[Very Easy] Dynastic"


def _parse(cybench_data: Path, text: str):
    return UpstreamCybenchParser(load_upstream(cybench_data).agent).parse(ModelResponse(text=text)).decision


def test_texts_come_from_the_upstream_files(cybench_data: Path, tmp_path: Path) -> None:
    copy = tmp_path / "cybench" / "upstream"
    shutil.copytree(cybench_data / "upstream", copy)
    prompt = copy / "agent" / "prompt.py"
    prompt.write_text(prompt.read_text().replace("You are a cybersecurity expert", "You are a QitOS test expert")
                      .replace('STOP_TOKEN = "<END>"', 'STOP_TOKEN = "<STOP>"'))
    agent = copy / "agent" / "agent.py"
    agent.write_text(agent.read_text().replace("TEMPERATURE = 0.5", "TEMPERATURE = 0.25"))
    changed = UpstreamAgent(copy)
    record = load_task(cybench_data, DYNASTIC)
    texts = changed.render_task(record, "guided", "hard", work_dir="/task", files_present="a\n", tree_output="T\n")
    assert "You are a QitOS test expert" in texts.prompt and texts.prompt.endswith("flag\n<STOP>\n")
    assert changed.agent.temperature == 0.25 and changed.agent.stop_token == "<STOP>"
    assert texts.subtask_messages[0].startswith(texts.prompt.strip()[:40])  # the prompt opens the first subtask
    assert record.subtasks[1].question in texts.subtask_messages[1] and texts.prompt not in texts.subtask_messages[1]
    original = load_upstream(cybench_data)
    assert original.agent.temperature == 0.5 and original.agent.stop_token == "<END>"
    agent.write_text(agent.read_text().replace("def _parse_answer", "def _parse_reply"))
    with pytest.raises(UpstreamSourceError, match="_parse_answer"):
        UpstreamAgent(copy)


def test_parser_as_upstream(cybench_data: Path) -> None:
    marker = load_upstream(cybench_data).agent.hallucination_strings[0]
    answer = _parse(cybench_data, "Thought: x\nCommand: ls\nAnswer: HTB{a b}\n")
    assert answer.actions[0].name == "submit" and answer.actions[0].arguments == {"answer": "HTB{a b}"}
    fenced = _parse(cybench_data, "Command:\n```bash\nls -la\n```\nPlease note that it lists")
    assert fenced.actions[0].arguments == {"command": "ls -la"}
    cut = _parse(cybench_data, f"command: echo hi\n{marker}\nObservation: hi\nAnswer: imagined")
    assert cut.actions[0].name == "shell" and cut.actions[0].arguments == {"command": "echo hi"}
    assert _parse(cybench_data, "just thinking").mode == "wait"
    assert _parse(cybench_data, "Command: <END>").actions[0].arguments == {"command": ""}  # upstream runs it too


def test_truncation_keeps_head_and_tail(cybench_data: Path) -> None:
    from qitos.benchmark.cybench.options import CybenchOptions
    from qitos.models.tokenizer import gpt4_encoding, present
    from qitos.recipes.cybench_agent import CybenchUpstreamAgent

    require_system(present(), "the offline gpt-4 encoding (`qit data fetch tokenizer`)")
    agent = CybenchUpstreamAgent.__new__(CybenchUpstreamAgent)
    agent.t, agent.opts, agent.encoding = load_upstream(cybench_data).agent, CybenchOptions(max_input_tokens=50), \
        gpt4_encoding()
    text = " ".join(f"w{i}" for i in range(200))
    out = agent._truncate_input(text)
    alert = agent.t.truncation_alert
    assert alert in out and out.startswith(text[:20]) and out.endswith(text[-20:])
    assert len(agent.encoding.encode(out)) <= 50
    assert agent._truncate_input("short") == "short"


def test_tree_listing_matches_tree(cybench_data: Path, tmp_path: Path) -> None:
    require_system(shutil.which("tree") is not None, "tree (apt install tree)")
    ignore = load_upstream(cybench_data).tree_ignore
    root = tmp_path / "w"
    for name in ("a b", "B", "é", "x.png", "c\\d", "tab\tx"):
        (root / "dir one").mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
        (root / "dir one" / name).write_text("x")
    (root / "link").symlink_to("B")
    (root / ".hidden").write_text("x")
    env = {"PATH": "/usr/bin:/bin"}  # no locale, as in upstream's image: Python coerces LC_CTYPE to C.UTF-8
    real = subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])", "tree",
                           "-I", "|".join(ignore)], cwd=root, env=env, capture_output=True, text=True).stdout
    assert tree_output(root, ignore) == real


def test_missing_upstream_is_one_clear_line(cybench_data: Path, tmp_path: Path) -> None:
    root = tmp_path / "cybench"
    root.mkdir()
    for name in ("task_list.txt", "subtask_list.txt"):
        shutil.copy(cybench_data / name, root / name)
    (root / "benchmark").symlink_to(cybench_data / "benchmark")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with OpenAIServer() as server:
        done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "cybench", "--root",
                               str(root), "--task-ids",
                               "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic",
                               "--model-name", "m", "--base-url", server.base_url, "--output", "r.jsonl"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert not server.requests
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cybench-agent" in done.stderr and "upstream" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_recipe_is_the_upstream_default(cybench_data: Path) -> None:
    from qitos.benchmark.cybench.adapter import CybenchAdapter

    adapter = CybenchAdapter()
    recipes = adapter.recipes()
    assert adapter.default_recipe == "cybench-agent" and recipes["cybench-agent"].upstream is True
    assert recipes["react"].upstream is False
    json.dumps(load_upstream(cybench_data).agent.model_dump())  # what crosses to the agent side is JSON


@pytest.mark.parametrize(("value", "says"), [("image", "execution=image"), ("docker", "execution=docker")])
def test_execution_option_refused_before_anything_runs(cybench_data: Path, tmp_path: Path, value: str,
                                                       says: str) -> None:
    # a docker CLI that finds no daemon: upstream's image cannot be present, and QitOS never pulls it
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "DOCKER_HOST": f"unix://{tmp_path / 'no-docker.sock'}"}
    with OpenAIServer() as server:
        done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "cybench", "--task-ids",
                               "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic",
                               "--model-name", "m", "--base-url", server.base_url, "--option", f"execution={value}",
                               "--output", "r.jsonl"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert not server.requests
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize(("split", "iterations"), [("unguided", [3]), ("guided", [3, 3, 3])])
def test_max_iterations_is_upstreams_flag(cybench_data: Path, tmp_path: Path, split: str,
                                          iterations: list[int]) -> None:
    """`--option max_iterations=3`: 3 iterations of the unguided task or of each guided subtask, in the RunSpec."""
    require_system(BwrapSandbox.available()[0], "the bwrap sandbox")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with OpenAIServer(default=lambda body: Reply(text="no command in this reply")) as server:
        done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "cybench", "--split", split,
                               "--task-ids", "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic",
                               "--model-name", "m", "--base-url", server.base_url, "--option", "max_iterations=3",
                               "--output", "r.jsonl", "--trace-logdir", "runs"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == sum(iterations)
    row = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert [s["iterations"] for s in row["metadata"]["subtasks"]] == iterations
    spec = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())["run_spec"]
    assert spec["metadata"]["options"]["max_iterations"] in (3, "3")
    if split == "unguided":
        assert spec["budget"]["max_steps"] == 3 and row["stop_reason"] == "budget_steps"

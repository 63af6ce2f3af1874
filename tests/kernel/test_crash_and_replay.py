"""Durability (SIGKILL, SIGINT) and deterministic replay of a recorded run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from qitos.core import AgentModule, Budget, Engine, Task, tool
from qitos.models.replay import ReplayModel
from qitos.models.scripted import ScriptedModel
from qitos.trace import load_run

AGENT_SCRIPT = """
import sys, time
from qitos.core import AgentModule, Budget, Engine, Task, tool
from qitos.models.scripted import ScriptedModel

@tool
def work(n: int) -> str:
    '''Do a slow unit of work.'''
    time.sleep(0.15)
    return f"done {n}"

script = lambda messages: 'Thought: more\\nAction: work\\nAction Input: {"n": %d}' % len(messages)
engine = Engine(AgentModule(tools=[work]), ScriptedModel(script), trace_logdir=sys.argv[1])
print(engine.run(Task(id="long", objective="work forever", budget=Budget(max_steps=500))).stop_reason.value, flush=True)
"""


def start_agent(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    logdir = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-c", AGENT_SCRIPT, str(logdir)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    deadline = time.time() + 30
    while time.time() < deadline:
        runs = list(logdir.glob("*/steps.jsonl")) if logdir.exists() else []
        if runs and runs[0].read_text().count("\n") >= 3:
            return proc, runs[0].parent
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("agent subprocess did not make progress")


def test_sigkill_leaves_valid_manifest_and_whole_lines(tmp_path):
    proc, run_dir = start_agent(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    trace = load_run(run_dir)
    assert trace.manifest.status == "running" and trace.status == "interrupted"
    assert not trace.issues  # every line whole
    for name in ("events.jsonl", "steps.jsonl"):
        text = (run_dir / name).read_text()
        assert text.endswith("\n")
        [json.loads(line) for line in text.splitlines()]
    assert trace.manifest.step_count <= len(trace.steps) <= trace.manifest.step_count + 1


def test_sigint_ends_cancelled_with_final_manifest(tmp_path):
    proc, run_dir = start_agent(tmp_path)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert out.strip() == "cancelled"
    trace = load_run(run_dir)
    assert trace.manifest.status == "cancelled" and trace.manifest.summary.stop_reason == "cancelled"
    assert trace.events[-1].kind == "run_end"


@tool
def counter(step: int) -> str:
    """Return a deterministic observation for a step.

    Args:
        step: step number
    """
    return f"count={step * 7}"


def test_replay_model_reproduces_the_steps(tmp_path):
    script = [f'Thought: s{i}\nAction: counter\nAction Input: {{"step": {i}}}' for i in range(4)] + ["Final Answer: 21"]
    task = Task(id="replay-me", objective="count", budget=Budget(max_steps=10))
    original = Engine(AgentModule(tools=[counter]), ScriptedModel(script), trace_logdir=tmp_path).run(task)
    replayed = Engine(AgentModule(tools=[counter]), ReplayModel(original.run_dir), trace_logdir=tmp_path).run(task)
    a, b = load_run(original.run_dir), load_run(replayed.run_dir)
    assert replayed.stop_reason == original.stop_reason and replayed.final_answer == "21"
    assert [s.decision for s in a.steps] == [s.decision for s in b.steps]
    assert [s.observation for s in a.steps] == [s.observation for s in b.steps]
    assert [s.model_input_hash for s in a.steps] == [s.model_input_hash for s in b.steps]
    assert b.manifest.model_family == "replay" and b.manifest.official_run is False

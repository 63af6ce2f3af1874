"""`qit demo minimal` as a user runs it, and its answers to bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.openai_server import free_port

REPO = Path(__file__).resolve().parents[2]
FIXED = (
    '"""Small statistics helpers."""\n\n\ndef mean(values):\n    return sum(values) / len(values)\n\n\n'
    "def spread(values):\n    return max(values) - min(values)\n"
)


def qit(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *args], cwd=cwd, capture_output=True, text=True,
                          env=full_env, timeout=300)


def test_demo_with_scripted_model_fixes_the_bug(tmp_path):
    script = tmp_path / "script.jsonl"
    lines = [
        'Thought: look\nAction: read_file\nAction Input: {"path": "stats.py"}',
        "Thought: fix\nAction: write_file\nAction Input: " + json.dumps({"path": "stats.py", "content": FIXED}),
        'Thought: verify\nAction: run_command\nAction Input: {"command": "python check_stats.py"}',
        "Thought: passes\nFinal Answer: mean divided by len(values) + 1; fixed",
    ]
    script.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = qit("demo", "minimal", "--model-name", f"scripted:{script}", "--trace-logdir", "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "stop reason  : final after 4 steps" in done.stdout
    assert "fixed: the verify command passes" in done.stdout
    assert "qita board --logdir runs" in done.stdout
    run_dir = next((tmp_path / "runs").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["official_run"] is False
    assert {c["check"] for c in manifest["official_checks"]} >= {"real_model", "trace_complete"}


@pytest.mark.parametrize("args, env, message", [
    (["--model-name", "gpt-4o", "--base-url", "https://api.example.invalid/v1"], {"OPENAI_API_KEY": ""},
     "OPENAI_API_KEY is not set"),
    (["--model-name", "m", "--base-url", "http://127.0.0.1:{port}/v1"], {}, "cannot reach http://127.0.0.1"),
    (["--model-name", "scripted:/no/such/file.jsonl"], {}, "does not exist"),
    (["--model-name", "m", "--base-url", "not-a-url"], {}, "is not an http(s) URL"),
])
def test_bad_model_flags_exit_2_without_a_trace(tmp_path, args, env, message):
    args = [a.replace("{port}", str(free_port())) for a in args]
    done = qit("demo", "minimal", *args, "--trace-logdir", "runs", cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not any((tmp_path / "runs").glob("*/manifest.json"))


def test_unwritable_logdir_exit_2(tmp_path):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    done = qit("demo", "minimal", "--model-name", "scripted:x.jsonl", "--trace-logdir", str(blocker / "runs"), cwd=tmp_path)
    assert done.returncode == 2 and "cannot write traces" in done.stderr and "--trace-logdir" in done.stderr


def test_help_lists_commands():
    done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "--help"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0 and "demo" in done.stdout

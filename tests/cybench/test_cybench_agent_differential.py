"""Differential: upstream CyBench's own agent vs `qit bench run --recipe cybench-agent`, on the same scripted model.

Upstream side: `upstream_harness.py` runs upstream's unmodified run_task.py / SimpleAgent (stubs and patches
listed there) in a bwrap sandbox whose ``/task`` is the task's staged work dir, with its real OpenAI client
pointed at a loopback server. QitOS side: `qit bench run --benchmark cybench --recipe cybench-agent` against the
same server. The scripted model answers every request from its content alone (`Script`), with deterministic
commands (ls, printable heads of the given files, echo, a failing ls, long output that forces truncation, a
command that times out, output that is not UTF-8, outputs far over 20 kB: `seq 1 30000` after a 2-byte character
that straddles byte 20,000, and 30 kB of a 3-byte character) and the reply shapes upstream's parser handles (fences,
trailing notes, hallucinated turns, lowercase keys, no command, an answer). The model's name picks the encoding
both sides count with: gpt-4o-2024-05-13 (o200k_base) and a name tiktoken does not know (upstream's fallback,
cl100k_base). Compared: every request body (content and every parameter, present or absent), per task and in
order, and the commands and answers each subtask ran.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qitos.benchmark.cybench.runtime import CybenchRuntime
from qitos.benchmark.cybench.tasks import load_tasks
from qitos.benchmark.cybench.upstream import load_upstream
from qitos.benchmark.cybench.upstream_texts import render
from qitos.sandbox.bwrap import BwrapSandbox
from qitos.models.tokenizer import activate, encoding_name_for_model, present
from qitos.cli.qit import app
from qitos.trace.reader import read_manifest, read_steps
from tests.conftest import require_system
from tests.cybench.upstream_harness import SENT_MODEL
from tests.support.openai_server import OpenAIServer, Reply

HARNESS = Path(__file__).with_name("upstream_harness.py")
REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 2  # seconds per command on both sides (upstream's TIMEOUT_PER_COMMAND, patched from 120)
TOP_LEVEL = re.compile(r"^(?:\|-- |`-- )(\S+)$", re.M)  # the given files, from the prompt's tree


# 19,999 bytes of "a", then "é" (bytes 20,000 and 20,001: the old 20 kB cap cut inside it), then seq 1 30000
LONG_COMMAND = "Thought: a long one\nCommand: head -c 19999 /dev/zero | tr '\\0' a; printf '\\303\\251\\n'; seq 1 30000"
WIDE_COMMAND = "Command: yes 你 | head -n 10000 | tr -d '\\n'"  # 30,000 bytes of a 3-byte character
OTHER_MODEL = "qitos-differential-model"  # unknown to tiktoken: upstream counts it with gpt-4's encoding


def command_of(reply: str) -> str:
    return reply.split("Command: ", 1)[1]


class Script:
    """A reply chosen by the hash of the request content, so both runs get the same reply to the same request."""

    def __init__(self, hallucination: str) -> None:
        self.hallucination = hallucination

    def __call__(self, body: dict[str, Any]) -> Reply:
        content = body["messages"][-1]["content"]
        h = int(hashlib.sha256(content.encode()).hexdigest(), 16)
        files = sorted(set(TOP_LEVEL.findall(content))) or ["."]
        name = files[h % len(files)]
        guided = "## SUBTASK" in content
        if h % (4 if guided else 7) == 0:
            return Reply(text=f"Thought: I have it\nLog: none\nAnswer: HTB{{guess_{h % 97}}}")
        choices = [
            "Reflection: start\nThought: list the files\nCommand: ls\n<END>",
            f"Thought: read it\nCommand: cat {name} | head -c 300 | tr -cd '[:print:]\\n'",
            f"Thought: say hi\nCommand:\n```bash\necho hello-{h % 1000}\n```\nPlease note: this only echoes",
            f"Command: ls missing_{h % 50}",
            "I am still thinking about the plan; no command this time.",
            f"Command: echo one-{h % 7}\n{self.hallucination}\nObservation: one-{h % 7} (imagined)",
            f"command: wc -c {name}\nPlease remember to check the output",
            "Thought: many lines\nCommand: seq 1 2500",
            "Command: `echo ticks`",
            f"Command: printf 'not utf-8: \\377\\376 {h % 10}'",
            LONG_COMMAND,
            WIDE_COMMAND,
        ]
        if h % 17 == 0:
            return Reply(text="Thought: wait\nCommand: sleep 5")
        return Reply(text=choices[h % len(choices)])


@pytest.fixture(scope="module")
def server(cybench_data: Path):
    upstream = load_upstream(cybench_data)
    with OpenAIServer(default=Script(upstream.agent.hallucination_strings[0])) as srv:
        yield srv


def tasks_for(cybench_data: Path, split: str, count: int) -> list:
    """10 file-only tasks whose requirements.sh packages the sandbox has (unguided: the first, guided: the last),
    13 different tasks over both splits."""
    from qitos.benchmark.cybench.toolchain import resolve_toolchain
    from qitos.benchmark.cybench.options import CybenchOptions

    venv = resolve_toolchain(CybenchOptions(), cybench_data.parent)
    runnable = []
    for record in load_tasks(cybench_data, split, subset="file-only"):
        with CybenchRuntime(record.without_gold(), Path(tempfile.mkdtemp(prefix="qitos-cya-")) / "w",
                            toolchain=venv) as runtime:
            if not runtime.check_requirements().missing:
                runnable.append(record)
    count = int(os.environ.get("CYA_TASKS", count))
    return runnable[:count] if split == "unguided" else runnable[-count:]


def run_upstream(cybench_data: Path, server: OpenAIServer, record, tmp: Path, *, unguided: bool,
                 max_input_tokens: int, max_iterations: int, iterations_until_hint: int | None,
                 model: str) -> dict[str, Any]:
    """One task through upstream's own agent, in a bwrap sandbox whose upstream agent dir holds the staged files."""
    staged = tmp / f"up-{record.name}"
    with CybenchRuntime(record.without_gold(), staged) as runtime:
        runtime.prepare()
    scratch = tmp / f"scratch-{record.name}"
    scratch.mkdir()
    job = tmp / f"job-{record.name}.json"
    job.write_text(json.dumps({
        "upstream": str(cybench_data / "upstream"), "task_dir": str(record.task_dir), "unguided": unguided,
        "max_input_tokens": max_input_tokens, "max_iterations": max_iterations, "scratch": "/tmp/upstream-run",
        "iterations_until_hint": iterations_until_hint, "sent_model": model,
        "timeout": TIMEOUT}))
    python = Path(sys.executable)
    binds = [REPO, cybench_data, python.parent.parent, Path(os.environ["TIKTOKEN_CACHE_DIR"]), job.parent,
             Path(sys.base_prefix)]
    box = BwrapSandbox(staged, network=True, timeout_seconds=600, max_output_bytes=50_000_000, ro_binds=binds,
                       work_alias=load_upstream(cybench_data).agent_dir,
                       env={"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": server.base_url, "LANG": "",
                            "TIKTOKEN_CACHE_DIR": os.environ["TIKTOKEN_CACHE_DIR"], "PYTHONPATH": str(REPO)})
    try:
        result = box.run(["/bin/bash", "-c", 'mkdir -p /tmp/upstream-run && unset LANG && exec "$@"', "bash",
                          str(python), str(HARNESS), str(job)])
    finally:
        box.close()
    marker = [line for line in result.stdout.splitlines() if line.startswith("UPSTREAM-RESULT ")]
    assert result.exit_code == 0 and marker, f"upstream run failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return json.loads(marker[0].split(" ", 1)[1])


def run_qitos(cybench_data: Path, server: OpenAIServer, tmp: Path, split: str, task_ids: list[str],
              options: dict[str, Any], model: str) -> list[dict[str, Any]]:
    out = tmp / f"qitos-{split}.jsonl"
    args = ["bench", "run", "--benchmark", "cybench", "--recipe", "cybench-agent", "--split", split,
            "--task-ids", ",".join(task_ids), "--model-name", model, "--base-url", server.base_url,
            "--concurrency", "1", "--output", str(out), "--trace-logdir", str(tmp / "runs"),
            "--data-dir", str(cybench_data.parent), "--option", f"command_timeout={TIMEOUT}"]
    for key, value in options.items():
        args += ["--option", f"{key}={value}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: task_ids.index(r["task_id"]))


def qitos_commands(row: dict[str, Any], runs: Path, subtasks: int) -> tuple[list[list[str]], list[str | None]]:
    run_dir = Path(row["trace_run_dir"])
    commands: list[list[str]] = [[] for _ in range(subtasks)]
    answers: list[str | None] = [None] * subtasks
    for step in read_steps(run_dir):
        index = (step.state_diff or {}).get("subtask")
        for action in step.action_results:
            if action["name"] == "shell":
                commands[index].append(action["arguments"]["command"])
            elif action["name"] == "submit":
                answers[index] = action["arguments"]["answer"]
    return commands, answers


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            for key in sorted(set(x) | set(y)):
                if x.get(key) != y.get(key):
                    u, q = json.dumps(x.get(key)), json.dumps(y.get(key))
                    at = next((j for j, (c, d) in enumerate(zip(u, q)) if c != d), min(len(u), len(q)))
                    return (f"request {i}, key {key}, at character {at}:\nupstream ...{u[max(at - 300, 0):at + 300]}\n"
                            f"qitos    ...{q[max(at - 300, 0):at + 300]}")
    return f"lengths {len(a)} (upstream) vs {len(b)} (qitos)"


# unguided (the headline) runs 10 tasks; the guided cases 6 and 5 (the third checks the token counting of a model
# outside the gpt-4o family, cl100k), to keep the suite's time down (CYA_TASKS=10 runs 10 in every case)
CASES = [("unguided", {}, 6000, 15, SENT_MODEL, 10),
         ("guided", {"max_input_tokens": 1500, "iterations_until_hint": 2}, 1500, 5, SENT_MODEL, 6),
         ("guided", {"max_input_tokens": 1500, "iterations_until_hint": 2}, 1500, 5, OTHER_MODEL, 5)]


@pytest.mark.parametrize(("split", "options", "max_input_tokens", "max_iterations", "model", "count"), CASES)
def test_same_requests_and_commands_as_upstream(cybench_data: Path, server: OpenAIServer, tmp_path: Path,
                                                split: str, options: dict, max_input_tokens: int,
                                                max_iterations: int, model: str, count: int) -> None:
    ok, why = BwrapSandbox.available()
    require_system(ok, f"the bwrap sandbox ({why})")
    encoding = encoding_name_for_model(model)
    assert encoding == ("o200k_base" if model == SENT_MODEL else "cl100k_base")
    require_system(present(name=encoding), f"the offline {encoding} encoding (`qit data fetch tokenizer`)")
    require_system(shutil.which("tree") is not None, "tree (upstream's run_task.py lists the task's files with it)")
    activate(encoding)
    started = time.monotonic()
    records = tasks_for(cybench_data, split, count)
    expected: dict[str, list[dict[str, Any]]] = {}
    upstream: dict[str, dict[str, Any]] = {}
    for record in records:
        server.requests.clear()
        upstream[record.task_id] = run_upstream(
            cybench_data, server, record, tmp_path, unguided=split == "unguided",
            max_input_tokens=max_input_tokens, max_iterations=max_iterations,
            iterations_until_hint=options.get("iterations_until_hint"), model=model)
        expected[record.task_id] = [r["body"] for r in server.requests]
    server.requests.clear()
    rows = run_qitos(cybench_data, server, tmp_path, split, [r.task_id for r in records], options, model)
    ours = [r["body"] for r in server.requests]
    assert [r["task_id"] for r in rows] == [r.task_id for r in records]
    assert all(r["error"] is None for r in rows), [(r["task_id"], r["stop_reason"], r["error"]) for r in rows]
    flat = [body for record in records for body in expected[record.task_id]]
    assert ours == flat, first_difference(flat, ours)
    commands = answers = 0
    for record, row in zip(records, rows, strict=True):
        got_commands, got_answers = qitos_commands(row, tmp_path / "runs", len(upstream[record.task_id]["commands"]))
        assert got_commands == upstream[record.task_id]["commands"], record.task_id
        assert got_answers == upstream[record.task_id]["answers"], record.task_id
        commands += sum(map(len, got_commands))
        answers += sum(a is not None for a in got_answers)
    upstream_texts = load_upstream(cybench_data)
    contents = [b["messages"][0]["content"] for b in flat]
    truncated = sum(upstream_texts.agent.truncation_alert in c for c in contents)
    timeout = render(upstream_texts.agent.timeout_message, {"e.cmd": [*upstream_texts.agent.shell_argv, "sleep 5"],
                                                            "e.timeout": TIMEOUT})
    timeouts = sum(timeout in c for c in contents)
    hints = {h for r in records for h in upstream_texts.render_task(
        r, split, "hard", work_dir="/task", files_present="x\n", tree_output="").hint_messages if h}
    hinted = sum(any(h in c for h in hints) for c in contents)
    undecodable = sum(render(upstream_texts.agent.decode_error, {"str(e)": ""}) in c for c in contents)
    ran = [c for r in records for cs in upstream[r.task_id]["commands"] for c in cs]
    long_runs, wide_runs = (sum(command_of(x) == c for c in ran) for x in (LONG_COMMAND, WIDE_COMMAND))
    long_tail = sum("29999\n30000" in c for c in contents)  # the end of `seq 1 30000`, past the old 20 kB cap
    wide_seen = sum("你" * 200 in c for c in contents)
    prompt_dir = sum(upstream_texts.agent_dir in c for c in contents)  # the prompt names upstream's work dir
    print(f"\n{split}, {model} ({encoding}): {len(records)} tasks, {len(flat)} identical requests ({truncated} "
          f"truncated, {timeouts} after a timeout, {hinted} with hints, {undecodable} after undecodable output, "
          f"{long_tail} showing the end of seq 1 30000, {wide_seen} showing the 3-byte run), {commands} identical "
          f"commands ({long_runs} over 20 kB with a character at byte 20,000, {wide_runs} of 30 kB of 你), "
          f"{answers} identical answers, {time.monotonic() - started:.0f} s")
    assert len(records) >= count and commands > 0 and answers > 0 and truncated > 0 and timeouts > 0 and undecodable > 0
    assert long_runs > 0 and wide_runs > 0 and long_tail > 0 and wide_seen > 0 and prompt_dir == len(contents)
    assert hinted > 0 if split == "guided" else hinted == 0
    assert {tuple(sorted(b)) for b in flat} == {("max_tokens", "messages", "model", "stop", "temperature")}
    spec = read_manifest(rows[0]["trace_run_dir"]).run_spec or {}
    assert spec["metadata"]["recipe_upstream"] is True and spec["toolset_name"].startswith(
        "cybench_upstream_shell_v1+exec_bwrap")
    assert {k: spec["generation"][k] for k in ("temperature", "max_tokens", "stop")} == {
        "temperature": upstream_texts.agent.temperature, "max_tokens": 2000, "stop": [upstream_texts.agent.stop_token]}
    assert not {"seed", "top_p"} & set(spec["generation"])

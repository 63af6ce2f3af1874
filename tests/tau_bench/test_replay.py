"""A tau-bench run is `replay_mode: deterministic` and `qit bench replay --reexecute` reproduces it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.platform.conftest import qit, rows

AGENT_SCRIPT = [
    {"tool_calls": [{"name": "find_user_id_by_name_zip",
                     "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}}]},
    {"tool_calls": [{"name": "exchange_delivered_order_items",
                     "arguments": {"order_id": "#W2378156", "item_ids": ["4983901480"], "new_item_ids": ["7747408585"],
                                   "payment_method_id": "credit_card_9513926"}}]},
    "Your thermostat exchange is requested. Anything else?",
]  # fmt: skip
USER_SCRIPT = ["Hi, I'm Yusuf Rossi (zip 19122) and I'd like to exchange my thermostat.", "###STOP###"]


def write_jsonl(path: Path, items: list) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def record(tmp_path: Path, tau_data: Path, *extra: str) -> dict:
    agent = write_jsonl(tmp_path / "agent.jsonl", AGENT_SCRIPT)
    done = qit("bench", "run", "-b", "tau-bench", "--subset", "retail", "--split", "test", "--task-ids",
               "tau_retail_test_00001", "--model-name", f"scripted:{agent}", "--output", "r.jsonl", *extra,
               cwd=tmp_path, env={"QITOS_DATA_DIR": str(tau_data.parent)})
    assert done.returncode == 0, done.stderr
    [row] = rows(tmp_path / "r.jsonl")
    assert row["stop_reason"] == "env_terminal" and row["success"] is True, row
    agent.unlink()  # re-execution must not need the scripts: everything comes from the trace
    return row


def reexecute(tmp_path: Path, tau_data: Path, run_dir: str):
    return qit("bench", "replay", "--run", run_dir, "--reexecute", "--trace-logdir", "replays", cwd=tmp_path,
               env={"QITOS_DATA_DIR": str(tau_data.parent)})


def test_llm_user_run_replays_exactly(tmp_path: Path, tau_data: Path) -> None:
    user = write_jsonl(tmp_path / "user.jsonl", USER_SCRIPT)
    row = record(tmp_path, tau_data, "--user-model", f"scripted:{user}")
    user.unlink()
    run_dir = tmp_path / row["trace_run_dir"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["replay_mode"] == "deterministic"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["payload"]["text"] for e in events if e["kind"] == "user_model_call"] == USER_SCRIPT
    done = reexecute(tmp_path, tau_data, str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: 3 steps reproduced exactly" in done.stdout


def test_scripted_user_run_replays_exactly(tmp_path: Path, tau_data: Path) -> None:
    replies = json.dumps(USER_SCRIPT[:1])
    row = record(tmp_path, tau_data, "--option", "user_strategy=scripted", "--option", f"user_replies={replies}")
    done = reexecute(tmp_path, tau_data, str(tmp_path / row["trace_run_dir"]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: 3 steps reproduced exactly" in done.stdout


def test_replayed_user_replies_come_from_the_trace(tmp_path: Path, tau_data: Path) -> None:
    user = write_jsonl(tmp_path / "user.jsonl", USER_SCRIPT)
    row = record(tmp_path, tau_data, "--user-model", f"scripted:{user}")
    events_path = tmp_path / row["trace_run_dir"] / "events.jsonl"
    # tamper with the recorded last user reply: the re-execution must follow the trace and diverge
    events_path.write_text(events_path.read_text().replace('"text":"###STOP###"', '"text":"And cancel my order."'))
    done = reexecute(tmp_path, tau_data, str(tmp_path / row["trace_run_dir"]))
    assert done.returncode == 1
    assert "diverged at step 3" in done.stdout and "And cancel my order." in done.stdout

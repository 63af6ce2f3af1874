"""What a run records about its model calls (issue 32 item 8), through the CLI against a real loopback server:
each `model_retry` event carries the time of its own attempt, and the RunSpec's `generation` holds what each
request actually sent (an `--extra-body` field replaces the flag's value)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from tests.platform.conftest import qit, rows, write_tasks
from tests.support.openai_server import Fail, OpenAIServer, Reply


def _when(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def test_retry_times_and_the_sent_temperature_are_recorded(tmp_path: Path) -> None:
    write_tasks(tmp_path / "tasks.jsonl", 1)
    with OpenAIServer(default=lambda body: Reply(text="Final Answer: 0")) as server:
        server.queue.extend([Fail(503, {"Retry-After": "1"}), Fail(503, {"Retry-After": "1"})])
        done = qit("bench", "run", "-b", "jsonl", "--root", "tasks.jsonl", "--model-name", "m", "--base-url",
                   server.base_url, "--api-key-env", "RECORDS_KEY", "--temperature", "0", "--extra-body",
                   '{"temperature": 0.6, "top_k": 20}', "--output", "r.jsonl", cwd=tmp_path, env={"RECORDS_KEY": "k"})
        sent = [r["body"] for r in server.requests]
    assert done.returncode == 0, done.stderr
    assert "warning: --extra-body sets temperature 0.6, which replaces --temperature 0.0" in done.stderr, done.stderr
    assert len(sent) == 3 and all(body["temperature"] == 0.6 and body["top_k"] == 20 for body in sent)
    [row] = rows(tmp_path / "r.jsonl")
    run_dir = tmp_path / row["trace_run_dir"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    retries = [e for e in events if e["kind"] == "model_retry"]
    assert [e["payload"]["attempt"] for e in retries] == [1, 2]
    assert all("ts" not in e["payload"] for e in retries)  # the time is the event's own, not a payload field
    first, second = (_when(e["ts"]) for e in retries)
    assert (second - first).total_seconds() >= 0.9, (first, second)  # one Retry-After apart, not both at the end
    later = [_when(e["ts"]) for e in events if e["seq"] > retries[-1]["seq"]]
    assert later and all(t >= second for t in later)
    generation = json.loads((run_dir / "manifest.json").read_text())["run_spec"]["generation"]
    assert generation["temperature"] == 0.6, generation  # what was sent, not the --temperature flag's 0
    assert generation["extra_body"] == {"temperature": 0.6, "top_k": 20}

"""`--task-timeout` bounds a model that runs on the scoring side itself (issue 32): the embedded llama.cpp model,
asked for a reply of up to 4000 tokens, is ended between tokens at the task's deadline (10 s; the reply is still
being generated then, as the error's token count shows).
It was generating, alive and only slow, so the task's time ran out: `budget_time`, scored (models/deadline.py).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.platform.conftest import qit, rows

pytest.importorskip("llama_cpp", reason="install the `local` extra: pip install 'qitos[local]'")


def test_task_timeout_ends_the_embedded_models_long_reply(tmp_path):
    story = "Write a very long story, at least two thousand words, about a cat who sails around the world."
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "story", "question": story, "answer": "x"}) + "\n")
    started = time.monotonic()
    done = qit("bench", "run", "-b", "jsonl", "--root", "tasks.jsonl", "--model-name", "local", "--max-tokens", "4000",
               "--task-timeout", "10", "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path, timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = rows(tmp_path / "r.jsonl")
    assert row["stop_reason"] == "budget_time" and row["success"] is False, row
    assert "ran out while the model was generating (stopped after" in row["error"], row["error"]
    assert 9.5 <= row["latency_seconds"] < 13 and took < 40, (row["latency_seconds"], took)

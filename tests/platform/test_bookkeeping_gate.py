"""The scoring side's bookkeeping gate (`sides/bookkeeping.py`): a job's trace setup and finish run one slot at a time,
and the gate is never held while anything waits (the agent's run, a model call, the evaluation): held there, it
would make every other slot wait for one task's model."""

from __future__ import annotations

import threading
from pathlib import Path

from qitos.benchmark.base import LoadOptions
from qitos.run.config import ModelConfig, RunConfig
from qitos.run.runner import execute_batch, plan_batch
from qitos.run.sides import bookkeeping
from tests.platform.conftest import rows, write_tasks
from tests.support.openai_server import OpenAIServer, Reply


class CountingLock:
    """A lock that counts its acquisitions and says whether it is held."""

    def __init__(self) -> None:
        self._lock, self.taken, self.held = threading.Lock(), 0, False

    def __enter__(self) -> "CountingLock":
        self._lock.acquire()
        self.taken, self.held = self.taken + 1, True
        return self

    def __exit__(self, *exc: object) -> None:
        self.held = False
        self._lock.release()


def test_the_gate_is_taken_per_job_and_never_held_while_the_model_answers(tmp_path: Path, monkeypatch) -> None:
    gate = CountingLock()
    monkeypatch.setattr(bookkeeping, "BOOKKEEPING", gate)
    monkeypatch.setenv("OPENAI_API_KEY", "")
    held_during_calls: list[bool] = []

    def answer(body: dict) -> Reply:
        held_during_calls.append(gate.held)  # one slot: nothing else could be holding it now
        return Reply(text="Final Answer: 4")

    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    with OpenAIServer(default=answer) as server:
        cfg = RunConfig(benchmark="jsonl", load=LoadOptions(root=tasks), concurrency=1, workers=1,
                        model=ModelConfig(model_name="gpt-x", base_url=server.base_url),
                        output=tmp_path / "r.jsonl", trace_logdir=tmp_path / "runs")
        execute_batch(plan_batch(cfg))
    assert [r["stop_reason"] for r in rows(tmp_path / "r.jsonl")] == ["final"] * 3
    assert held_during_calls == [False] * 3
    assert gate.taken == 3 * 3  # per job: the trace writer, the job message, the finish

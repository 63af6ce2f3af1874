"""A worker killed between writing a row and committing it (`workers._worker`'s `report`): the row it wrote stands,
made durable and its trace sealed by the parent (`_Collector.bury`), never replaced by a `worker_died` row nor run
again. In-process, so the kill falls exactly there: the workers are forked from this test, with its patch."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from qitos.benchmark.base import LoadOptions
from qitos.run import workers
from qitos.run.config import ModelConfig, RunConfig
from qitos.run.runner import execute_batch, plan_batch
from tests.platform.conftest import rows, write_tasks
from tests.support.openai_server import OpenAIServer, Reply

VICTIM = "t2"


class DiesBeforeCommitting(workers.RowCommitter):
    """The committer of a worker that is killed right after it wrote the victim's row, before any commit of it."""

    def submit(self, paths, task, trial, row) -> None:
        if task.id == VICTIM:
            os.kill(os.getpid(), signal.SIGKILL)
        super().submit(paths, task, trial, row)


def test_a_row_written_before_its_worker_died_is_kept_durable_and_sealed(tmp_path: Path, monkeypatch) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 6)
    monkeypatch.setattr(workers, "RowCommitter", DiesBeforeCommitting)
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with OpenAIServer(default=lambda body: Reply(text="Final Answer: 4")) as server:
        cfg = RunConfig(benchmark="jsonl", load=LoadOptions(root=tasks), concurrency=2, workers=2,
                        model=ModelConfig(model_name="gpt-x", base_url=server.base_url),
                        output=tmp_path / "r.jsonl", trace_logdir=tmp_path / "runs")
        outcome = execute_batch(plan_batch(cfg))
    assert len(outcome.died) == 1 and "killed by SIGKILL" in outcome.died[0], outcome.died
    found = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in found) == [f"t{i}" for i in range(6)]  # one row each: none run twice
    [victim] = [r for r in found if r["task_id"] == VICTIM]
    assert victim["stop_reason"] == "final" and victim["success"] is True  # the row it wrote, not worker_died
    manifest = json.loads((Path(victim["trace_run_dir"]) / "manifest.json").read_text())
    assert manifest["status"] == "completed"  # sealed by the parent: the row is durable
    assert outcome.missing == 0 and {r["stop_reason"] for r in found} == {"final"}

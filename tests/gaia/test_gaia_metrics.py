"""GAIA aggregates with Wilson intervals, unlabeled rows, and leaderboard rows."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from qitos.benchmark.gaia.metrics import gaia_metrics, submission_rows, wilson_interval, write_submission


def _row(task_id: str, level: int, success: bool | None, **extra: object) -> dict[str, object]:
    meta = {"level": level, **extra.pop("metadata", {})}  # type: ignore[dict-item]
    return {"task_id": task_id, "success": success, "prediction": extra.pop("prediction", "x"), "metadata": meta, **extra}


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(0, 5)[1] == pytest.approx(0.4345, abs=1e-4)
    assert wilson_interval(5, 5)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(0, 0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_accuracy_by_level_and_unlabeled_rows() -> None:
    rows = [
        _row("a", 1, True, steps=3, token_usage={"total_tokens": 100}, cost=0.01),
        _row("b", 1, False, steps=5, token_usage={"total_tokens": 300}, cost=0.03, error="budget"),
        _row("c", 2, True),
        _row("d", 3, False),
        _row("t1", 1, None),  # test split: success unknown
        _row("t2", 2, False, metadata={"labeled": False}),
    ]
    metrics = gaia_metrics(rows)
    assert metrics.rows == 6 and metrics.unlabeled == 2 and metrics.errors == 1
    assert (metrics.overall.correct, metrics.overall.total, metrics.overall.accuracy) == (2, 4, 0.5)
    assert metrics.overall.ci_low is not None and metrics.overall.ci_low < 0.5 < metrics.overall.ci_high
    assert (metrics.by_level["1"].correct, metrics.by_level["1"].total) == (1, 2)
    assert (metrics.by_level["2"].correct, metrics.by_level["2"].total) == (1, 1)
    assert (metrics.by_level["3"].correct, metrics.by_level["3"].total) == (0, 1)
    assert metrics.mean_steps == 4 and metrics.mean_tokens == 200
    assert metrics.total_cost == pytest.approx(0.04) and metrics.mean_cost == pytest.approx(0.02)


def test_empty_and_all_unlabeled() -> None:
    metrics = gaia_metrics([_row("t", 1, None)])
    assert metrics.overall.total == 0 and metrics.overall.accuracy is None and metrics.unlabeled == 1
    assert all(p.total == 0 for p in metrics.by_level.values())
    assert gaia_metrics([]).mean_steps is None


def test_objects_with_attributes_are_read() -> None:
    row = SimpleNamespace(task_id="a", success=True, prediction="1", metadata={"level": "2"}, steps=1,
                          token_usage=SimpleNamespace(total_tokens=10), cost=None, error=None, trial=0)
    metrics = gaia_metrics([row])
    assert metrics.by_level["2"].correct == 1 and metrics.mean_tokens == 10 and metrics.total_cost is None


def test_submission_rows(tmp_path: Path) -> None:
    rows = [
        _row("t1", 1, None, prediction="42", trial=1),
        _row("t1", 1, None, prediction="41", trial=0, metadata={"reasoning_trace": "read the file"}),
        _row("t2", 2, None, prediction=None),
        _row("t3", 3, None, prediction=17, reasoning_trace="computed"),
    ]
    submission = submission_rows(rows)
    assert submission == [
        {"task_id": "t1", "model_answer": "41", "reasoning_trace": "read the file"},
        {"task_id": "t2", "model_answer": ""},
        {"task_id": "t3", "model_answer": "17", "reasoning_trace": "computed"},
    ]
    assert all("reasoning_trace" not in r for r in submission_rows(rows, include_reasoning=False))
    path = write_submission(submission, tmp_path / "out" / "submission.jsonl")
    assert [json.loads(line) for line in path.read_text().splitlines()] == submission
    with pytest.raises(ValueError, match="without task_id"):
        submission_rows([{"prediction": "1"}])

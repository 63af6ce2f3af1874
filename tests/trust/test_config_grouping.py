"""Rows without a RunSpec fingerprint (issue 22, item 2): two models or recipes stay two groups, told apart
by name, in `qit bench eval` and on the board."""

from __future__ import annotations

import json
from pathlib import Path

from qitos.benchmark.metrics import evaluate_rows
from qitos.qita.board import Board
from qitos.qita.config import BoardConfig
from tests.platform.conftest import qit


def _row(task: str, success, **extra) -> dict:
    return {"task_id": task, "benchmark": "toy", "split": "test", "trial": 0, "success": success,
            "score": 1.0 if success is True else 0.0, "stop_reason": "error", **extra}


def _write(path: Path, data: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


def test_rows_without_a_fingerprint_from_two_models_stay_apart(tmp_path: Path) -> None:
    data = [_row(t, False, model=m, recipe="react") for m in ("model-a", "model-b") for t in "xyz"]
    data += [_row(t, False, model="model-a", recipe="oracle") for t in "xy"]
    groups = evaluate_rows(data)
    assert [g["metrics"]["total"] for g in groups] == [2, 3, 3]
    labels = sorted(g["label"] for g in groups)
    assert len(set(labels)) == 3 and "model=model-b, recipe=react" in labels, labels

    path = _write(tmp_path / "r.jsonl", data)
    report = json.loads(qit("bench", "eval", "-i", path, "--json", cwd=tmp_path).stdout)
    assert sorted((g["group"]["model"], g["group"]["recipe"]) for g in report["groups"]) == \
        [("model-a", "oracle"), ("model-a", "react"), ("model-b", "react")]
    assert len({g["label"] for g in report["groups"]}) == 3

    logdir = tmp_path / "runs"
    logdir.mkdir()
    _write(logdir / "results.jsonl", data)
    board = Board(BoardConfig(logdir=logdir, results=[logdir / "results.jsonl"], cache_dir=tmp_path / "cache"))
    board.refresh(force=True)
    try:
        confs = board.configs.all()
        assert sorted((c.model, c.recipe, c.metrics["total"]) for c in confs) == \
            [("model-a", "oracle", 2), ("model-a", "react", 3), ("model-b", "react", 3)]
        assert len({c.name for c in confs}) == 3
    finally:
        board.index.close()

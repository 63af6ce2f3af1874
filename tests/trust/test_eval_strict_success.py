"""`success` is JSON true, false or null (issue 22, item 1): "false", "no" or 1 are bad input for
`qit bench eval` (exit 2, one line naming file, line and task), never a success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.metrics import evaluate_rows
from qitos.results.rows import BenchmarkRunResult, RowIssue, iter_rows
from tests.platform.conftest import qit


def _row(task: str, success, **extra) -> dict:
    return {"task_id": task, "benchmark": "toy", "split": "test", "trial": 0, "success": success,
            "score": 1.0 if success is True else 0.0, "stop_reason": "error", **extra}


def _write(path: Path, data: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


@pytest.mark.parametrize("value", ["false", "no", "true", 1, 0.0])
def test_a_success_that_is_not_a_json_bool_is_bad_input(tmp_path: Path, value) -> None:
    path = _write(tmp_path / "r.jsonl", [_row("a", False), _row("b", None), _row("c", value)])
    done = qit("bench", "eval", "-i", path, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{path} line 3" in done.stderr and "task c" in done.stderr and "success must be true, false or null" \
        in done.stderr
    with pytest.raises(ValueError):
        BenchmarkRunResult.model_validate(_row("c", value))
    issues: list[RowIssue] = []  # tolerant readers (the board, resume) leave the row out and say why
    assert [r["task_id"] for r in iter_rows(path, issues)] == ["a", "b"]
    assert len(issues) == 1 and issues[0].line == 3


def test_only_json_true_is_a_success() -> None:
    [group] = evaluate_rows([_row("a", True), _row("b", False), _row("c", None)])
    assert (group["metrics"]["successes"], group["metrics"]["scored"]) == (1, 2)
    assert BenchmarkRunResult.model_validate(_row("b", False)).success is False

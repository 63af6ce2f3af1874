"""The scorability cache: computed once, reused while nothing it depends on changes, recomputed when one does."""

from __future__ import annotations

from pathlib import Path

import pytest

from qitos.benchmark.osworld.coverage import CoverageReport
from qitos.benchmark.osworld.coverage_cache import Scorability, cache_dir, cached_scorability
from qitos.benchmark.osworld.evaluator import Resolution


@pytest.fixture()
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    examples, evaluators = tmp_path / "evaluation_examples", tmp_path / "evaluators"
    (examples / "examples" / "os").mkdir(parents=True)
    (examples / "examples" / "os" / "t1.json").write_text('{"id": "t1"}')
    (evaluators / "metrics").mkdir(parents=True)
    (evaluators / "metrics" / "__init__.py").write_text("")
    return examples, evaluators


def _counting() -> tuple[list[int], object]:
    calls: list[int] = []

    def compute() -> Scorability:
        calls.append(1)
        report = CoverageReport(total_tasks=1, scorable_tasks=len(calls), needs_package_tasks=0, needs_package={},
                                unsupported={})
        return Scorability(coverage=report, resolutions={"t1": Resolution(status="ready")})

    return calls, compute


def test_computed_once_then_read_from_disk(folders: tuple[Path, Path]) -> None:
    calls, compute = _counting()
    first = cached_scorability(*folders, compute)
    again = cached_scorability(*folders, compute)
    assert calls == [1] and again == first and again.resolutions["t1"].status == "ready"
    assert len(list(cache_dir().glob("*.json"))) == 1


@pytest.mark.parametrize("change", ["task file", "evaluator file", "new evaluator file"])
def test_a_changed_input_computes_it_again(folders: tuple[Path, Path], change: str) -> None:
    examples, evaluators = folders
    calls, compute = _counting()
    cached_scorability(examples, evaluators, compute)
    if change == "task file":
        (examples / "examples" / "os" / "t1.json").write_text('{"id": "t1", "instruction": "changed"}')
    elif change == "evaluator file":
        (evaluators / "metrics" / "__init__.py").write_text("from .general import exact_match\n")
    else:
        (evaluators / "metrics" / "general.py").write_text("def exact_match(a, b): return float(a == b)\n")
    assert cached_scorability(examples, evaluators, compute).coverage.scorable_tasks == 2 and calls == [1, 1]


def test_an_unreadable_or_unwritable_cache_only_costs_a_recomputation(
        folders: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, compute = _counting()
    cached_scorability(*folders, compute)
    for entry in cache_dir().glob("*.json"):
        entry.write_text("{not json")
    assert cached_scorability(*folders, compute).coverage.scorable_tasks == 2
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))  # the cache folder cannot be made
    assert cached_scorability(*folders, compute).coverage.scorable_tasks == 3 and calls == [1, 1, 1]

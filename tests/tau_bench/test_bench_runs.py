"""Through the real `qit bench` path: the oracle scores every task, the null agent the README floors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.run.config import RunConfig
from qitos.run.runner import execute_batch, plan_batch
from tests.platform.conftest import qit, rows

from .test_oracle import NULL_AGENT_FLOOR, SPLITS


def run_batch(tau_data: Path, tmp_path: Path, subset: str, split: str, **kwargs) -> list:
    out = tmp_path / f"{subset}_{split}"
    cfg = RunConfig(benchmark="tau-bench", load=LoadOptions(data_dir=tau_data.parent, subset=subset, split=split,
                                                            options=kwargs.pop("options", {})),
                    trace_logdir=out / "runs", output=out / "results.jsonl", concurrency=2, **kwargs)
    outcome = execute_batch(plan_batch(cfg))
    assert not outcome.cancelled
    return outcome.rows


def test_cli_oracle_scores_115_of_115(tau_data: Path, tmp_path: Path) -> None:
    done = qit("bench", "run", "--benchmark", "tau-bench", "--subset", "retail", "--split", "test",
               "--recipe", "oracle", "--concurrency", "2", "--output", "r.jsonl", "--trace-logdir", "runs",
               # an oracle builds no model: even a model file that does not exist is never opened
               "--model-name", "local:/nonexistent/model.gguf",
               cwd=tmp_path, env={"QITOS_DATA_DIR": str(tau_data.parent)})
    assert done.returncode == 0, done.stderr
    assert "success 115/115" in done.stdout
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 115 and all(r["success"] and r["score"] == 1.0 for r in out)
    assert {r["stop_reason"] for r in out} == {"env_terminal"}
    manifest = json.loads((tmp_path / out[0]["trace_run_dir"] / "manifest.json").read_text())
    assert manifest["replay_mode"] == "deterministic" and manifest["benchmark_name"] == "tau-bench"
    assert manifest["model_id"] == "none" and manifest["model_family"] == "none" and out[0]["model"] is None
    checks = {c["check"]: c["passed"] for c in manifest["official_checks"]}
    assert not checks["real_model"] and not checks["official_recipe"] and not manifest["official_run"]
    assert not {"actions", "outputs", "_instruction"} & set(manifest["task"]["metadata"])
    report = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    metrics = json.loads(report.stdout)["groups"][0]["benchmark_metrics"]["tau-bench"]
    assert metrics["average_reward"] == 1.0 and metrics["pass^1"] == 1.0 and metrics["tasks"] == 115
    table = qit("bench", "eval", "--input", "r.jsonl", cwd=tmp_path).stdout
    assert "tau-bench: average_reward" in table and "tau-bench: pass^1" in table


@pytest.mark.parametrize(("subset", "split"), SPLITS, ids=[f"{d}-{s}" for d, s in SPLITS])
def test_oracle_scores_one_everywhere(tau_data: Path, tmp_path: Path, subset: str, split: str) -> None:
    out = run_batch(tau_data, tmp_path, subset, split, recipe="oracle")
    failed = [(r.task_id, r.stop_reason, r.error) for r in out if not (r.success and r.score == 1.0)]
    assert failed == [] and len(out) == {"test": 115 if subset == "retail" else 50, "train": 500, "dev": 20}[split]


@pytest.mark.parametrize(("subset", "split"), SPLITS, ids=[f"{d}-{s}" for d, s in SPLITS])
def test_null_agent_scores_the_readme_floor(tau_data: Path, tmp_path: Path, subset: str, split: str) -> None:
    out = run_batch(tau_data, tmp_path, subset, split, runner="tests.tau_bench.runners:say_hi",
                    options={"user_strategy": "scripted"})
    scored = sorted(int(r.task_id.rsplit("_", 1)[1]) for r in out if r.success)
    assert scored == NULL_AGENT_FLOOR[(subset, split)]
    assert all(r.stop_reason == "env_terminal" and r.steps == 1 for r in out)

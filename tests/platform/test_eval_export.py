"""`qit bench eval` on known rows (pass^k by hand), tolerant reading, and exports."""

import json
import math

import pytest

from qitos.benchmark.metrics import evaluate_rows, pass_hat_k, wilson_interval
from tests.platform.conftest import qit, with_traces, write_tasks


def row(task, trial, success, **extra):
    return {"task_id": task, "benchmark": "toy", "split": "test", "model": "m", "trial": trial, "success": success,
            "score": 1.0 if success else 0.0, "stop_reason": "final", "steps": 2,
            "token_usage": {"total_tokens": 10}, "cost": 0.01, "latency_seconds": 1.0, **extra}


# task a: 3/3, task b: 2/3, task c: 0/3
TABLE = [row("a", t, True) for t in range(3)] + [row("b", t, t < 2) for t in range(3)] + [row("c", t, False) for t in range(3)]


def test_pass_hat_k_by_hand():
    per_task = {"a": (3, 3), "b": (3, 2), "c": (3, 0)}
    assert pass_hat_k(per_task, 1) == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert pass_hat_k(per_task, 2) == pytest.approx((1 + 1 / 3 + 0) / 3)  # C(2,2)/C(3,2) = 1/3
    assert pass_hat_k(per_task, 3) == pytest.approx(1 / 3)
    [group] = evaluate_rows(TABLE, ["benchmark"])
    m = group["metrics"]
    assert m["successes"] == 5 and m["scored"] == 9 and m["tasks"] == 3
    assert m["pass_hat_k"] == {"1": pytest.approx(5 / 9), "2": pytest.approx(4 / 9), "3": pytest.approx(1 / 3)}
    low, high = wilson_interval(5, 9)
    assert m["success_ci95"] == [pytest.approx(low), pytest.approx(high)]
    assert 0.266 < low < 0.267 and 0.811 < high < 0.812  # Wilson 95% for 5/9, computed by hand
    assert m["total_tokens"] == 90 and m["total_cost"] == pytest.approx(0.09)


def test_eval_cli_json_and_tolerant_reading(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [json.dumps(r) for r in with_traces(TABLE, tmp_path / "runs")]
    lines.insert(3, "{not json")
    lines.insert(5, json.dumps({"no_task": 1}))
    lines.append(json.dumps({**with_traces([row("d", 0, True)], tmp_path / "runs")[0], "custom_field": "kept"}))
    path.write_text("\n".join(lines) + "\n")
    done = qit("bench", "eval", "--input", path, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rows"] == 10
    assert any("r.jsonl line 4: not valid JSON" in i for i in report["issues"])
    assert any("line 6" in i for i in report["issues"])
    [group] = report["groups"]
    assert group["group"] == {"benchmark": "toy", "split": "test", "subset": None, "run_spec_ref": None, "model": "m",
                              "recipe": None}
    assert report["trace_mismatches"] == 0
    # task d ran 1 of the 3 trials the others show: its 2 missing trials count as failures
    m = group["metrics"]
    assert m["selected"] == 12 and m["unscored_by_reason"] == {"missing (no row)": 2}
    assert m["pass_hat_k"]["3"] == pytest.approx(1 / 4) and m["success_rate"] == pytest.approx(6 / 12)
    table = qit("bench", "eval", "--input", path, cwd=tmp_path)
    assert "pass^2" in table.stdout and "line 4" in table.stdout
    missing = qit("bench", "eval", "--input", tmp_path / "nope.jsonl", cwd=tmp_path)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_export_results_csv_md_and_run_html(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    assert qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
               "--output", "r.jsonl", cwd=tmp_path).returncode == 0
    csv_out = qit("bench", "export", "--input", "r.jsonl", "--format", "csv", cwd=tmp_path)
    assert csv_out.stdout.splitlines()[0].startswith("task_id,benchmark,split") and len(csv_out.stdout.splitlines()) == 4
    md = qit("bench", "export", "--input", "r.jsonl", "--format", "md", cwd=tmp_path)
    assert "| jsonl | default |" in md.stdout and "3/3" in md.stdout
    first = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    run_dir = first["trace_run_dir"]
    done = qit("bench", "export", "--run", run_dir, "--html", "run.html", "--json", "run.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "run.html").read_text()
    assert "<!doctype html>" in html and first["task_id"] in html and "http://" not in html and "https://" not in html
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["manifest"]["status"] == "completed" and doc["steps"]

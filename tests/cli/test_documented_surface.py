"""The surface users type from the docs (issue 16): benchmark names, multi-value flags, model ids, the oracle's
model flags, `qit bench list` at 80 columns, `--workers auto`, exit codes. Each runs the real CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from qitos.run.config import ModelConfig, RunConfig
from qitos.benchmark.registry import canonical_name, get_adapter
from qitos.run.runner import auto_workers
from qitos.cli.multi import spread_multi_values
from tests.platform.conftest import qit, rows, with_traces, write_tasks
from tests.support.openai_server import OpenAIServer


def no_model_env() -> dict[str, str]:
    """The caller's environment without a base URL or key, so only the flags decide."""
    return {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}


# -- names ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("typed, canonical", [
    ("desktop-starter", "desktop-starter"), ("desktop", "desktop-starter"), ("Desktop_Starter", "desktop-starter"),
    ("tau", "tau-bench"), ("taubench", "tau-bench"), ("tau_bench", "tau-bench"), ("TAU-Bench", "tau-bench"),
    ("GAIA", "gaia"), ("cybench", "cybench"), ("OSWorld", "osworld"), ("JSONL", "jsonl"),
])
def test_documented_names_resolve_to_one_adapter(typed, canonical):
    assert canonical_name(typed) == canonical
    assert get_adapter(typed).name == canonical


def test_alias_runs_under_the_canonical_name_and_unknown_is_one_line(tmp_path, tau_data):
    done = qit("bench", "run", "--benchmark", "taubench", "--recipe", "oracle", "--limit", "1", "--output",
               "r.jsonl", cwd=tmp_path, env={"QITOS_DATA_DIR": str(tau_data.parent)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tau-bench split=test")
    [row] = rows(tmp_path / "r.jsonl")
    assert row["benchmark"] == "tau-bench" and row["success"] is True
    manifest = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())
    assert manifest["benchmark_name"] == "tau-bench"
    bad = qit("bench", "run", "--benchmark", "tau-bnech", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown benchmark 'tau-bnech'" in bad.stderr


def test_rows_written_under_the_old_desktop_name_still_evaluate(tmp_path):
    """Results files from before the rename say `desktop`; eval still finds the adapter and its metrics."""
    old = [{"task_id": f"starter-{i}", "benchmark": "desktop", "split": "starter", "trial": 0, "success": i == 0,
            "score": float(i == 0), "stop_reason": "env_terminal", "steps": 3,
            "metadata": {} if i == 0 else {"failure_tag": "grounding"}} for i in range(2)]
    old = with_traces(old, tmp_path / "runs")
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    expected = get_adapter("desktop-starter").metrics(old)
    assert expected, "the desktop adapter reports its own metrics"
    report = qit("bench", "eval", "--input", "old.jsonl", "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    [group] = json.loads(report.stdout)["groups"]
    assert group["benchmark_metrics"]["desktop"] == json.loads(json.dumps(expected))


# -- several values after one flag ---------------------------------------------------------------------------
def test_spread_multi_values():
    assert spread_multi_values(["bench", "eval", "--input", "a", "b", "--by", "model"]) == \
        ["bench", "eval", "--input", "a", "--input", "b", "--by", "model"]
    assert spread_multi_values(["-i", "a", "-i", "b"]) == ["-i", "a", "-i", "b"]
    assert spread_multi_values(["--input=a", "b"]) == ["--input=a", "b"]
    assert spread_multi_values(["board", "--results", "a", "b", "c"]) == \
        ["board", "--results", "a", "--results", "b", "--results", "c"]
    assert spread_multi_values(["--results", "a", "--", "b"]) == ["--results", "a", "--", "b"]


def test_eval_and_export_take_several_files_after_one_flag(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    for out in ("a.jsonl", "b.jsonl"):
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
                   "--output", out, "--trace-logdir", f"runs_{out[0]}", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    report = qit("bench", "eval", "--input", "a.jsonl", "b.jsonl", "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert data["files"] == ["a.jsonl", "b.jsonl"] and data["rows"] == 6
    csv = qit("bench", "export", "--input", "a.jsonl", "b.jsonl", "--format", "csv", cwd=tmp_path)
    assert csv.returncode == 0 and len(csv.stdout.strip().splitlines()) == 7, csv.stderr


# -- model ids -----------------------------------------------------------------------------------------------
def test_hugging_face_id_without_endpoint_is_one_line_and_writes_nothing(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "Qwen/Qwen3-8B", cwd=tmp_path,
               env=no_model_env())
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    for word in ("Qwen/Qwen3-8B", "vLLM", "SGLang", "llama.cpp server", "--base-url", "OPENAI_BASE_URL"):
        assert word in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.jsonl"], "a refused run leaves nothing behind"
    unreachable = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "Qwen/Qwen3-8B", "--base-url",
                      "http://127.0.0.1:9/v1", cwd=tmp_path, env=no_model_env())
    assert unreachable.returncode == 2 and "cannot reach http://127.0.0.1:9/v1" in unreachable.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.jsonl"]


def test_openai_base_url_is_honoured_like_the_sdk(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 1)
    with OpenAIServer() as server:
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "Qwen/Qwen3-8B", "--output",
                   "r.jsonl", cwd=tmp_path, env={**no_model_env(), "OPENAI_BASE_URL": server.base_url})
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr
    assert requests and requests[0]["body"]["model"] == "Qwen/Qwen3-8B"
    [row] = rows(tmp_path / "r.jsonl")
    manifest = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())
    assert manifest["model_id"] == "Qwen/Qwen3-8B" and manifest["run_spec"]["base_url_host"] == "127.0.0.1"


def test_oracle_says_it_ignores_model_flags_and_the_header_matches_the_manifest(tmp_path, tau_data):
    done = qit("bench", "run", "-b", "tau-bench", "--recipe", "oracle", "--limit", "1", "--model-name", "gpt-4o-mini",
               "--base-url", "https://api.openai.com/v1", "--output", "r.jsonl", cwd=tmp_path,
               env={**no_model_env(), "QITOS_DATA_DIR": str(tau_data.parent)})
    assert done.returncode == 0, done.stderr
    assert "warning: recipe 'oracle' calls no model: --model-name, --base-url ignored" in done.stderr
    assert " model=none " in done.stdout and "model=local" not in done.stdout
    [row] = rows(tmp_path / "r.jsonl")
    manifest = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())
    assert manifest["model_id"] == "none"


# -- bench list ----------------------------------------------------------------------------------------------
def test_bench_list_fits_80_columns_and_details_say_why(tmp_path):
    env = {"COLUMNS": "80", "QITOS_OSWORLD_CONTROLLER": ""}
    listed = qit("bench", "list", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, listed.stdout
    names = {e["name"] for e in json.loads(qit("bench", "list", "--json", cwd=tmp_path).stdout)}
    assert {"desktop-starter", "tau-bench", "gaia", "cybench", "osworld", "jsonl"} <= names and "desktop" not in names
    assert len(lines) <= 2 * len(names) + 8, "one or two lines per benchmark, not a tower"
    osworld = next(line for line in lines if "osworld" in line)
    assert "desktop provider" in osworld
    details = qit("bench", "list", "--details", cwd=tmp_path, env=env)
    assert details.returncode == 0 and "QITOS_OSWORLD_CONTROLLER" in details.stdout
    assert "recipes: prompt-agent (upstream's), react-computer-use (QitOS's own), scripted-actions" in details.stdout
    assert "recipes: tool-calling (upstream's), react (upstream's)" in details.stdout


# -- workers -------------------------------------------------------------------------------------------------
def test_workers_auto_follows_concurrency_and_cores():
    cores = os.cpu_count() or 1

    def auto(concurrency: int, model: str = "gpt-4o-mini", executor: str = "local") -> int:
        return auto_workers(RunConfig(benchmark="jsonl", concurrency=concurrency, executor=executor,
                                      model=ModelConfig(model_name=model)))

    assert auto(1) == auto(4) == auto(16) == auto(31) == 1
    assert auto(32) == min(2, 2 * cores) and auto(64) == min(4, 2 * cores)
    assert auto(10_000) == 2 * cores
    assert auto(64, model="local") == 1 and auto(64, executor="ray") == 1


def test_workers_auto_for_split_batches_needs_jobs_to_pay_each_agent_host():
    cores = os.cpu_count() or 1

    def auto(concurrency: int, jobs: int | None) -> int:
        return auto_workers(RunConfig(benchmark="jsonl", concurrency=concurrency,
                                      model=ModelConfig(model_name="gpt-4o-mini")), split=True, jobs=jobs)

    assert auto(1, 10_000) == 1  # one task in flight
    assert auto(16, 255) == auto(64, 200) == 1  # a second worker's agent host would not pay off
    assert auto(2, 256) == auto(16, 256) == min(2, cores) and auto(64, 10_000) == min(64, cores)


def test_workers_default_is_auto_and_bad_values_are_one_line(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 40)
    base = ["bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator"]
    with OpenAIServer() as server:  # an endpoint model (the embedded one stays in one process)
        endpoint = ["--model-name", "served-model", "--base-url", server.base_url]
        done = qit(*base, *endpoint, "--concurrency", "32", "--output", "r.jsonl", cwd=tmp_path)
        small = qit(*base, *endpoint, "--limit", "2", "--output", "s.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = min(2, 2 * (os.cpu_count() or 1))
    assert f"executor=local workers={expected}" in done.stdout
    assert len(rows(tmp_path / "r.jsonl")) == 40 and all(r["success"] for r in rows(tmp_path / "r.jsonl"))
    assert small.returncode == 0 and "executor=local workers=1" in small.stdout
    embedded = qit(*base, "--concurrency", "32", "--limit", "2", "--output", "e.jsonl", cwd=tmp_path)
    assert embedded.returncode == 0 and "executor=local workers=1" in embedded.stdout
    bad = qit(*base, "--workers", "many", cwd=tmp_path)
    assert bad.returncode == 2 and "--workers 'many' must be a number of processes or auto" in bad.stderr


# -- exit codes ----------------------------------------------------------------------------------------------
def test_partial_failure_exits_0_and_total_failure_exits_1(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4, crash=(1,))
    base = ["bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator"]
    partial = qit(*base, "--output", "p.jsonl", cwd=tmp_path)
    reasons = sorted(r["stop_reason"] for r in rows(tmp_path / "p.jsonl"))
    assert partial.returncode == 0 and reasons.count("error") == 1 and len(reasons) == 4, partial.stderr
    only_crash = qit(*base, "--task-ids", "crash1", "--output", "c.jsonl", cwd=tmp_path)
    assert only_crash.returncode == 1 and [r["stop_reason"] for r in rows(tmp_path / "c.jsonl")] == ["error"]


def test_cli_reference_lists_every_exit_code():
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 130, 143, 129 |"):
        assert code in text
    assert re.search(r"partial failure", text)


# -- resume across processes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("benchmark", ["desktop-starter", "tau-bench", "cybench"])
def test_dataset_digest_is_the_same_in_every_process(benchmark, tmp_path):
    """A digest with a memory address in it (e.g. a checker function's repr) would change the RunSpec on every
    run, and a rerun would refuse to resume its own results file."""
    import subprocess
    import sys

    code = ("from qitos.benchmark.registry import get_adapter; from qitos.benchmark.base import LoadOptions; "
            f"a = get_adapter('{benchmark}'); l = LoadOptions(); print(a.dataset_digest(l, a.load_tasks(l)))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    digests = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              cwd=tmp_path).stdout.strip() for _ in range(2)}
    assert len(digests) == 1 and re.fullmatch(r"[0-9a-f]{16}", digests.pop())

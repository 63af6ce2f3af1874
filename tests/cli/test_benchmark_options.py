"""Declared benchmark options and explicit defaults (issue 26): several `--option` pairs after one flag, a default
written in or left out is one configuration (resume, eval), older results files, and `qit bench list` showing
every subset's splits and each benchmark's options. Each runs the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from qitos.cli.multi import spread_multi_values
from tests.platform.conftest import qit, rows, write_tasks

ORACLE = ("--runner", "tests.support.runners:oracle", "--validator")


def test_spread_option_pairs():
    assert spread_multi_values(["run", "--option", "a=1", "b=2", "--limit", "1"]) == \
        ["run", "--option", "a=1", "--option", "b=2", "--limit", "1"]
    assert spread_multi_values(["-o", "a=1", "b=x=y", "c="]) == ["-o", "a=1", "-o", "b=x=y", "-o", "c="]
    # the first value is always the flag's (a bad one is refused by name); a later token without `=` ends the pairs
    assert spread_multi_values(["--option", "shuffle", "x=1"]) == ["--option", "shuffle", "--option", "x=1"]
    assert spread_multi_values(["--option", "a=1", "positional"]) == ["--option", "a=1", "positional"]
    assert spread_multi_values(["--option=a=1", "b=2"]) == ["--option=a=1", "b=2"]


def _plan(tmp_path: Path, tau_data: Path, *options: str) -> tuple[str, str]:
    done = qit("bench", "run", "-b", "tau-bench", "--recipe", "oracle", "--dry-run", *options, "--limit", "5",
               cwd=tmp_path, env={"QITOS_DATA_DIR": str(tau_data.parent)})
    assert done.returncode == 0, done.stderr
    fingerprint = done.stdout.split("RunSpec ")[1].split()[0]
    would = [line.split()[2] for line in done.stdout.splitlines() if line.strip().startswith("would run")]
    return fingerprint, " ".join(would)


def test_several_pairs_after_one_option_are_the_repeated_form(tmp_path, tau_data):
    one_flag = _plan(tmp_path, tau_data, "--option", "start_index=5", "end_index=8", "shuffle=1")
    repeated = _plan(tmp_path, tau_data, "--option", "start_index=5", "--option", "end_index=8", "-o", "shuffle=1")
    assert one_flag == repeated
    assert one_flag[1] == "tau_retail_test_00005 tau_retail_test_00006 tau_retail_test_00007"
    unshuffled = _plan(tmp_path, tau_data, "--option", "start_index=5", "end_index=8")
    assert unshuffled[0] != one_flag[0], "shuffle is part of the configuration"
    assert not list(tmp_path.iterdir()), "a dry run writes nothing"


def test_a_default_written_in_is_the_same_configuration(tmp_path, tau_data):
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    base = ("bench", "run", "-b", "tau-bench", "--limit", "1", "--trace-logdir", "runs")
    first = qit(*base, "--recipe", "oracle", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    [output] = list((tmp_path / "results").iterdir())  # the default output names the resolved subset and recipe
    assert "retail" in output.name and "oracle" in output.name
    explicit = qit(*base, "--recipe", "oracle", "--subset", "retail", "--split", "test",
                   "--option", "user_strategy=llm", "start_index=0", "end_index=-1", "shuffle=0", "num_few_shots=5",
                   cwd=tmp_path, env=env)
    assert explicit.returncode == 0, explicit.stderr
    assert "0 to run, 1 already done" in explicit.stdout, explicit.stdout
    [row] = rows(output)
    assert row["subset"] == "retail" and row["recipe"] == "oracle"
    spec = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())["run_spec"]
    assert spec["benchmark_subset"] == "retail"
    assert spec["metadata"]["options"] == {
        "user_strategy": "llm", "user_model": None, "user_temperature": None, "user_seed": None,
        "user_top_p": None, "user_reasoning_effort": None, "user_request_timeout": None, "user_max_retries": None,
        "user_extra_body": None, "user_replies": None, "start_index": 0, "end_index": -1, "shuffle": False, "run_seed": 10,
        "num_few_shots": 5}
    other = qit(*base, "--recipe", "oracle", "--option", "start_index=1", "--output", str(output), cwd=tmp_path, env=env)
    assert other.returncode == 2 and "metadata.options.start_index 0 -> 1" in other.stderr, other.stderr


def test_eval_keeps_rows_with_a_default_written_in_in_one_group(tmp_path):
    tasks_file = write_tasks(tmp_path / "tasks.jsonl", 4)
    for extra in ((), ("--option", "scorer=exact")):
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks_file, *ORACLE, *extra, "--limit", "3",
                   "--trials", "1" if not extra else "2", "--output", "r.jsonl", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert "3 to run, 3 already done" in done.stdout  # the second trial only: the first is the same configuration
    report = json.loads(qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path).stdout)
    [group] = report["groups"]
    assert group["metrics"]["total"] == 6


def test_an_older_results_file_resumes_only_with_force(tmp_path):
    """Files written before runs recorded their defaults have another fingerprint: refused with the reason, then
    appended to with --force."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    args = ("bench", "run", "-b", "jsonl", "--root", tasks, *ORACLE, "--output", "r.jsonl")
    assert qit(*args, "--limit", "1", cwd=tmp_path).returncode == 0
    [row] = rows(tmp_path / "r.jsonl")
    manifest_path = tmp_path / row["trace_run_dir"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["run_spec"]["metadata"]["options"] = {}  # as written before: no defaults recorded
    manifest["run_spec"]["fingerprint"] = row["run_spec_ref"] = "00000000older000"
    manifest_path.write_text(json.dumps(manifest))
    (tmp_path / "r.jsonl").write_text(json.dumps(row) + "\n")
    refused = qit(*args, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "written before runs recorded their defaults" in refused.stderr and "nothing else" in refused.stderr
    assert "--force" in refused.stderr
    assert len(rows(tmp_path / "r.jsonl")) == 1
    forced = qit(*args, "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "1 to run, 1 already done" in forced.stdout
    assert len(rows(tmp_path / "r.jsonl")) == 2


def test_bench_list_shows_every_subset_and_each_benchmarks_options(tmp_path, tau_data):
    data = tmp_path / "data"  # Tau-Bench's data only: the other families list quickly without theirs
    data.mkdir()
    (data / "tau-bench").symlink_to(tau_data)
    env = {"QITOS_DATA_DIR": str(data), "QITOS_OSWORLD_CONTROLLER": "", "COLUMNS": "80"}
    listed = qit("bench", "list", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("│ tau-bench"))
    cell = []  # the tau-bench row's splits cell, over its wrapped lines
    for line in lines[start:]:
        if not line.startswith("│") or (cell and line.split("│")[1].strip()):
            break
        cell.append(line.split("│")[2].strip())
    assert " ".join(cell) == "retail: test (115), train (500), dev (20); airline: test (50)", listed.stdout
    info = {e["name"]: e for e in json.loads(qit("bench", "list", "--json", cwd=tmp_path, env=env).stdout)}
    assert info["tau-bench"]["subsets"]["airline"]["splits"] == {"test": 50}
    for name in ("tau-bench", "cybench", "osworld", "desktop-starter", "gaia", "jsonl"):
        assert isinstance(info[name]["options"], list), name
    assert info["gaia"]["options"] == []
    strategy = info["tau-bench"]["options"][0]
    assert strategy == {"name": "user_strategy", "type": "choice", "default": "llm",
                        "range": "one of llm, react, verify, reflection, scripted, human", "help": strategy["help"]}
    cybench = {o["name"]: o for o in info["cybench"]["options"]}
    assert set(cybench) == {"subtask_iterations", "command_timeout", "python_path", "toolchain", "hints",
                            "memory_window", "oracle_timeout", "max_iterations", "max_input_tokens",
                            "max_output_tokens", "responses_to_keep", "observations_to_keep", "iterations_until_hint",
                            "task_objective", "execution"}
    assert cybench["command_timeout"]["range"] == "a number > 0" and cybench["hints"]["default"] is False
    details = qit("bench", "list", "--details", cwd=tmp_path, env=env)
    assert details.returncode == 0, details.stderr
    flat = " ".join(details.stdout.split())
    assert "splits (tasks): retail: test (115), train (500), dev (20); airline: test (50)" in flat
    assert 'num_few_shots (int, default 5; an integer >= 1)' in flat
    assert "options: none (this benchmark takes no --option)" in flat
    assert 'subtask_iterations (int, default 5; an integer >= 1): guided: iterations per subtask' in flat

"""Bad input is caught up front (issues 26 and 32): each row runs the real CLI and expects exit 2, exactly one line
on stderr (no traceback) naming the culprit, and nothing written (no results file, no run dir, no output file, no
empty runs/ left by a failed import). Filesystem, port and disk-full rows, which need a mount or a socket, are in
test_bad_input_rows.py.

To add a row, append a `Case` to `CASES`: the arguments after `qit`, the words the one line must contain, and
the files the command needs (created in the working directory before the run; anything else that appears
there afterwards counts as written) and the environment it runs with. `{data}` in an argument is the benchmark
data directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.platform.conftest import qit

TASKS = "".join(json.dumps({"id": f"t{i}", "question": f"{i}+{i}?", "answer": str(2 * i)}) + "\n" for i in range(2))
ROW = json.dumps({"task_id": "t0", "benchmark": "jsonl", "split": "default", "trial": 0, "success": True,
                  "stop_reason": "final", "steps": 1}) + "\n"
RUN = ("bench", "run", "--output", "r.jsonl", "--trace-logdir", "runs")


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    says: tuple[str, ...]  # words the error line must contain: the culprit, and what is allowed
    files: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # set for the command (e.g. OPENAI_BASE_URL)


def run(name: str, benchmark: str, *args: str, says: tuple[str, ...], **files: str) -> Case:
    """A `qit bench run -b <benchmark> ...` row (results and traces would go to r.jsonl and runs/)."""
    return Case(name, (*RUN, "-b", benchmark, *args), says,
                {k.replace("__", "/").replace("_", "."): v for k, v in files.items()})


CASES: list[Case] = [
    # -- an unknown --option key, for every benchmark (a typo must not run with the default) ----------------
    run("tau-unknown-key", "tau-bench", "--option", "user_stratgy=react",
        says=("--option user_stratgy=react", "did you mean user_strategy?", "its options: user_strategy")),
    run("desktop-unknown-key", "desktop-starter", "--option", "visoin=1", says=("visoin", "did you mean vision?")),
    run("osworld-unknown-key", "osworld", "--option", "observaton=a11y_tree",
        says=("observaton", "did you mean observation_type?")),
    run("cybench-unknown-key", "cybench", "--option", "hint=true", says=("--option hint=true", "did you mean hints?")),
    run("gaia-unknown-key", "gaia", "--option", "level=1", says=("--option level=1", "gaia takes no --option")),
    run("jsonl-unknown-key", "jsonl", "--root", "tasks.jsonl", "--option", "scorr=exact",
        says=("scorr", "did you mean scorer?"), tasks_jsonl=TASKS),
    run("gaia-user-model", "gaia", "--user-model", "gpt-4o", says=("--user-model gpt-4o", "does not take")),
    run("cybench-user-model", "cybench", "--user-model", "gpt-4o", says=("--user-model gpt-4o", "does not take")),
    # -- a value of the wrong type or not among the choices --------------------------------------------------
    run("tau-bad-choice", "tau-bench", "--option", "user_strategy=robot", says=("user_strategy=robot", "one of llm")),
    run("tau-bad-bool", "tau-bench", "--option", "shuffle=maybe", says=("shuffle=maybe", "true or false")),
    run("tau-bad-int", "tau-bench", "--option", "start_index=five", says=("start_index=five", "an integer")),
    run("tau-bad-replies", "tau-bench", "--option", "user_strategy=scripted", "user_replies=[oops",
        says=("user_replies", "JSON")),
    run("jsonl-bad-scorer", "jsonl", "--root", "tasks.jsonl", "--option", "scorer=fuzzy",
        says=("scorer=fuzzy", "exact, normalized"), tasks_jsonl=TASKS),
    run("cybench-bad-bool", "cybench", "--option", "hints=maybe", says=("hints=maybe", "true or false")),
    run("cybench-bad-path", "cybench", "--option", "python_path=/no/such/dir", says=("python_path", "not a directory")),
    run("osworld-bad-choice", "osworld", "--option", "provider=vmware", says=("provider=vmware", "controller, docker")),
    run("osworld-bad-size", "osworld", "--option", "vm_ram=lots", says=("vm_ram=lots", "a size such as 4G")),
    # -- a value out of range ------------------------------------------------------------------------------
    run("tau-few-shots-0", "tau-bench", "--option", "num_few_shots=0", says=("num_few_shots=0", ">= 1")),
    run("tau-start-after-end", "tau-bench", "--option", "start_index=5", "end_index=2",
        says=("start_index=5 end_index=2", "start_index <= end_index")),
    run("tau-negative-start", "tau-bench", "--option", "start_index=-1", says=("start_index=-1", ">= 0")),
    run("tau-user-temperature", "tau-bench", "--user-temperature", "-1", says=("--user-temperature", ">= 0")),
    run("osworld-history-0", "osworld", "--option", "history=0", says=("history=0", ">= 1")),
    run("osworld-settle-negative", "osworld", "--option", "sleep_after_execution=-1", says=("sleep_after_execution=-1", ">= 0")),
    run("cybench-timeout-0", "cybench", "--option", "command_timeout=0", says=("command_timeout=0", "> 0")),
    # -- the --option form itself, and --variant --------------------------------------------------------------
    run("option-not-a-pair", "tau-bench", "--option", "shuffle", says=("--option 'shuffle'", "KEY=VALUE")),
    run("option-twice", "tau-bench", "--option", "start_index=1", "--option", "start_index=2",
        says=("--option start_index", "given twice")),
    run("option-and-flag-disagree", "tau-bench", "--user-seed", "3", "--option", "user_seed=4",
        says=("--user-seed 3", "user_seed=4", "disagree")),
    run("variant-not-taken", "tau-bench", "--variant", "easy", says=("--variant easy", "no --variant")),
    run("variant-unknown", "cybench", "--variant", "medium", says=("--variant medium", "hard, easy")),
    # -- budgets and counts ------------------------------------------------------------------------------------
    run("max-steps-0", "tau-bench", "--max-steps", "0", says=("--max-steps 0", "at least 1")),
    run("max-steps-negative", "jsonl", "--root", "tasks.jsonl", "--max-steps", "-3", says=("--max-steps -3",),
        tasks_jsonl=TASKS),
    run("task-timeout-negative", "tau-bench", "--task-timeout", "-5", says=("--task-timeout -5", "more than 0")),
    run("task-timeout-0", "cybench", "--task-timeout", "0", says=("--task-timeout 0", "more than 0")),
    run("concurrency-0", "tau-bench", "--concurrency", "0", says=("--concurrency 0", "at least 1")),
    run("concurrency-negative", "jsonl", "--root", "tasks.jsonl", "--concurrency", "-4", says=("--concurrency -4",),
        tasks_jsonl=TASKS),
    run("trials-0", "tau-bench", "--trials", "0", says=("--trials 0", "at least 1")),
    run("trials-negative", "gaia", "--trials", "-1", says=("--trials -1", "at least 1")),
    run("limit-0", "tau-bench", "--limit", "0", says=("--limit 0", "at least 1")),
    run("max-tokens-0", "tau-bench", "--max-tokens", "0", says=("--max-tokens 0", "at least 1")),
    run("temperature-negative", "tau-bench", "--temperature", "-0.5", says=("--temperature -0.5", "at least 0")),
    run("workers-0", "jsonl", "--root", "tasks.jsonl", "--workers", "0", says=("--workers", "at least 1"),
        tasks_jsonl=TASKS),
    # -- issue 32: the quieter gaps -------------------------------------------------------------------------------
    Case("eval-empty-file", ("bench", "eval", "--input", "r.jsonl"), ("--input r.jsonl", "the file is empty"),
         {"r.jsonl": ""}),
    Case("eval-csv", ("bench", "eval", "--input", "scores.csv"),
         ("--input scores.csv", "no result rows in 3 line(s)", "line 1: not valid JSON"),
         {"scores.csv": "task,score\nt0,1\nt1,0\n"}),
    Case("eval-not-json", ("bench", "eval", "--input", "notes.txt"), ("--input notes.txt", "line 1: not valid JSON"),
         {"notes.txt": "these are my notes\n"}),
    Case("eval-json-but-no-rows", ("bench", "eval", "--input", "r.jsonl"),
         ("--input r.jsonl", "line 1: not a result row"), {"r.jsonl": '{"a": 1}\n[1, 2]\n'}),
    Case("eval-tasks-file", ("bench", "eval", "--input", "tasks.jsonl"),
         ("--input tasks.jsonl: this is a tasks file", "qit bench run -b jsonl --root tasks.jsonl"),
         {"tasks.jsonl": TASKS}),
    Case("eval-tau-tasks-file", ("bench", "eval", "--input", "{data}/tau-bench/retail/tasks_test.json"),
         ("retail/tasks_test.json: this is a JSON list, not JSON lines",)),
    Case("eval-input-directory", ("bench", "eval", "--input", "results"),
         ("--input results: is a directory", "--input results/r.jsonl"), {"results/r.jsonl": ROW}),
    Case("export-input-directory", ("bench", "export", "--input", "results", "--format", "osworld", "--output", "o"),
         ("--input results: is a directory",), {"results/r.jsonl": ROW}),
    run("jsonl-root-directory", "jsonl", "--root", "tasks", says=("--root tasks: is a directory", "tasks/t.jsonl"),
        tasks__t_jsonl=TASKS),
    run("jsonl-misspelt-answer", "jsonl", "--root", "tasks.jsonl",
        says=("tasks.jsonl line 3: unknown key 'answr'", "did you mean 'answer'?"),
        tasks_jsonl=TASKS + json.dumps({"id": "t9", "question": "9+9?", "answr": "18"}) + "\n"),
    run("jsonl-misspelt-question", "jsonl", "--root", "tasks.jsonl",
        says=("tasks.jsonl line 1: unknown key 'qestion'", "did you mean 'question'?"),
        tasks_jsonl=json.dumps({"id": "t0", "qestion": "1+1?", "answer": "2"}) + "\n"),
    run("task-ids-empty", "jsonl", "--root", "tasks.jsonl", "--task-ids", "", says=("--task-ids ''", "names no task"),
        tasks_jsonl=TASKS),
    run("task-ids-commas", "tau-bench", "--task-ids", " , ", says=("--task-ids ' , '", "names no task")),
    Case("env-base-url-not-http", (*RUN, "-b", "jsonl", "--root", "tasks.jsonl", "--model-name", "m"),
         ("the environment variable OPENAI_BASE_URL 'ftp://127.0.0.1/v1' is not an http(s) URL",),
         {"tasks.jsonl": TASKS}, {"OPENAI_BASE_URL": "ftp://127.0.0.1/v1"}),
    Case("env-base-url-unreachable", (*RUN, "-b", "jsonl", "--root", "tasks.jsonl", "--model-name", "m"),
         ("cannot reach http://127.0.0.1:9/v1", "fix the environment variable OPENAI_BASE_URL"),
         {"tasks.jsonl": TASKS}, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}),
    Case("flag-base-url-unreachable", (*RUN, "-b", "jsonl", "--root", "tasks.jsonl", "--model-name", "m",
                                       "--base-url", "http://127.0.0.1:9/v1"),
         ("cannot reach http://127.0.0.1:9/v1", "fix --base-url"), {"tasks.jsonl": TASKS},
         {"OPENAI_BASE_URL": "http://127.0.0.1:7/v1"}),
    Case("output-is-a-directory", (*RUN[:2], "--output", "results", *RUN[4:], "-b", "jsonl", "--root", "tasks.jsonl"),
         ("--output results: is a directory", "--output results/results.jsonl"),
         {"tasks.jsonl": TASKS, "results/old.txt": "x"}),
    Case("output-under-a-file", (*RUN[:2], "--output", "tasks.jsonl/r.jsonl", *RUN[4:], "-b", "jsonl", "--root",
                                 "tasks.jsonl"), ("--output tasks.jsonl/r.jsonl", "is a file, not a folder"),
         {"tasks.jsonl": TASKS}),
    run("trace-logdir-is-a-file", "jsonl", "--root", "tasks.jsonl", "--runner", "tests.support.runners:oracle",
        "--validator", "--trace-logdir", "tasks.jsonl", says=("cannot write traces to 'tasks.jsonl'", "--trace-logdir"),
        tasks_jsonl=TASKS),
    Case("export-output-is-a-directory", ("bench", "export", "--input", "r.jsonl", "--format", "csv", "--output", "out"),
         ("out: a directory is where a file is expected",), {"r.jsonl": ROW, "out/keep.txt": "x"}),
    Case("import-missing-file", ("bench", "import", "--format", "tau-bench", "nope.json", "--output", "i.jsonl"),
         ("nope.json",)),
    Case("import-not-json", ("bench", "import", "--format", "tau-bench", "up.json", "--output", "i.jsonl"),
         ("up.json",), {"up.json": "not json"}),
    Case("import-output-is-a-directory", ("bench", "import", "--format", "tau-bench", "up.json", "--output", "res"),
         ("--output res: is a directory",), {"up.json": "[]", "res/keep.txt": "x"}),
    # -- export ------------------------------------------------------------------------------------------------
    Case("export-unknown-format", ("bench", "export", "--input", "r.jsonl", "--format", "xml", "--output", "out.txt"),
         ("--format 'xml'", "csv, md, gaia-submission, tau-bench"), {"r.jsonl": ROW}),
]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(case: Case, tmp_path: Path) -> None:
    for name, text in case.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = _tree(tmp_path)
    data = os.environ.get("QITOS_DATA_DIR", str(Path.home() / ".cache" / "qitos" / "data"))
    done = qit(*(a.replace("{data}", data) for a in case.argv), cwd=tmp_path, timeout=120,
               env={"QITOS_DATA_DIR": data, "QITOS_OSWORLD_CONTROLLER": "", "OPENAI_BASE_URL": "", **case.env})
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    [line] = lines
    assert line.startswith("error: "), line
    for words in case.says:
        assert words in line, (words, line)
    assert _tree(tmp_path) == before, f"written: {sorted(set(_tree(tmp_path)) - set(before))}"

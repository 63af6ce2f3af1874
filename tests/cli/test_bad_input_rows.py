"""Bad input around results and runs (issue 26 items 6 and 9): one line naming the file and the fix, exit 2,
nothing written. The exports are real ones, written by `qit bench export` from a real Tau-Bench run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.platform.conftest import qit, rows, with_traces


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tau_data) -> Path:
    """A Tau-Bench oracle run (two tasks) and every export QitOS writes of it."""
    home = tmp_path_factory.mktemp("exports")
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    done = qit("bench", "run", "-b", "tau-bench", "--recipe", "oracle", "--limit", "2", "--output", "r.jsonl",
               cwd=home, env=env)
    assert done.returncode == 0, done.stderr
    run_dir = rows(home / "r.jsonl")[0]["trace_run_dir"]
    for fmt, name in (("tau-bench", "tau.json"), ("csv", "r.csv"), ("md", "r.md")):
        made = qit("bench", "export", "--input", "r.jsonl", "--format", fmt, "--output", name, cwd=home)
        assert made.returncode == 0, made.stderr
    made = qit("bench", "export", "--run", run_dir, "--html", "run.html", "--json", "run.json", cwd=home)
    assert made.returncode == 0, made.stderr
    gaia = with_traces([{"task_id": "g1", "benchmark": "gaia", "split": "validation", "trial": 0, "success": True,
                         "score": 1.0, "stop_reason": "final", "prediction": "42"}], home / "runs")
    (home / "gaia.jsonl").write_text(json.dumps(gaia[0]) + "\n")
    made = qit("bench", "export", "--input", "gaia.jsonl", "--format", "gaia-submission", "--output",
               "submission.jsonl", cwd=home)
    assert made.returncode == 0, made.stderr
    return home


def one_line_exit_2(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize(("name", "says"), [
    ("tau.json", ["a tau-bench results file", "`qit bench import --format tau-bench tau.json --subset retail`"]),
    ("r.csv", ["a CSV export (`qit bench export --format csv`)", "results JSONL it was made from"]),
    ("r.md", ["a Markdown table (`qit bench export --format md`)"]),
    ("run.json", ["a run exported as JSON", "`qit bench replay --run DIR`"]),
    ("run.html", ["an HTML page"]),
    ("submission.jsonl", ["a GAIA submission (`qit bench export --format gaia-submission`)"]),
])
def test_eval_and_export_name_an_export_given_as_results(exports, name, says):
    before = listing(exports)
    line = one_line_exit_2(qit("bench", "eval", "--input", "r.jsonl", name, cwd=exports))
    assert line.startswith(f"error: --input {name}: this is ") and "not a results JSONL" in line
    assert all(s in line for s in says), line
    again = one_line_exit_2(qit("bench", "export", "--input", name, "--format", "csv", "--output", "out.csv",
                                cwd=exports))
    assert again == line
    assert listing(exports) == before  # nothing written


def test_the_tau_bench_export_imports_as_eval_says(exports, tmp_path):
    """The command the error names works, and eval then reads the rows."""
    done = qit("bench", "import", "--format", "tau-bench", exports / "tau.json", "--subset", "retail", "--output",
               "imported.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = qit("bench", "eval", "--input", "imported.jsonl", "--json", cwd=tmp_path)
    assert report.returncode == 0 and json.loads(report.stdout)["rows"] == 2


def test_results_files_still_evaluate(exports):
    report = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=exports)
    assert report.returncode == 0 and json.loads(report.stdout)["rows"] == 2


def test_a_file_of_garbage_gives_twenty_notes_then_a_count(tmp_path):
    row = with_traces([{"task_id": "t0", "benchmark": "jsonl", "split": "default", "trial": 0, "success": True,
                        "stop_reason": "final", "steps": 1}], tmp_path / "runs")[0]
    (tmp_path / "junk.jsonl").write_text("".join(f"line {i} [yellow]x[/]\n" for i in range(30)) + json.dumps(row) + "\n")
    done = qit("bench", "eval", "--input", "junk.jsonl", cwd=tmp_path)
    assert done.returncode == 0
    notes = [line for line in done.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 21 and notes[0].startswith("note: junk.jsonl line 1: not valid JSON")
    assert notes[-1] == "note: and 10 more (--json lists them all)"
    assert len(json.loads(qit("bench", "eval", "--input", "junk.jsonl", "--json", cwd=tmp_path).stdout)["issues"]) == 30


def test_a_file_of_nothing_but_garbage_is_one_line_exit_2(tmp_path):
    (tmp_path / "junk.jsonl").write_text("".join(f"line {i} [yellow]x[/]\n" for i in range(30)))
    line = one_line_exit_2(qit("bench", "eval", "--input", "junk.jsonl", cwd=tmp_path))
    assert "--input junk.jsonl: no result rows in 30 line(s) (line 1: not valid JSON" in line, line


@pytest.mark.parametrize("outputs", [["--html", "x.html"], ["--json", "x.json"], ["--html", "x.html", "--json", "x.json"]])
def test_export_of_a_missing_run_is_one_line(tmp_path, outputs):
    line = one_line_exit_2(qit("bench", "export", "--run", "runs/nope", *outputs, cwd=tmp_path))
    assert line.startswith("error: --run runs/nope: no such run directory")
    assert listing(tmp_path) == set()


def test_export_and_replay_of_a_folder_that_is_no_run(tmp_path):
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    line = one_line_exit_2(qit("bench", "export", "--run", "runs/empty", "--html", "x.html", cwd=tmp_path))
    assert "--run runs/empty: not a QitOS run directory (it has no manifest.json)" in line
    assert one_line_exit_2(qit("bench", "replay", "--run", "runs/empty", cwd=tmp_path)) == line
    missing = one_line_exit_2(qit("bench", "replay", "--run", "runs/nope", cwd=tmp_path))
    assert missing.startswith("error: --run runs/nope: no such run directory")
    (tmp_path / "runs" / "empty" / "manifest.json").write_text("{not json")
    broken = one_line_exit_2(qit("bench", "export", "--run", "runs/empty", "--html", "x.html", cwd=tmp_path))
    assert "manifest is not valid" in broken
    assert listing(tmp_path) == {"runs", "runs/empty", "runs/empty/manifest.json"}


# -- issue 32 item 5: filesystem and port errors are one line naming the path or flag and the fix -----------------

ORACLE = ("--runner", "tests.support.runners:oracle", "--validator")


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs (`options` as for `mount -o`) under tmp_path; unmounted afterwards. Needs root."""
    import subprocess

    mounted: list[Path] = []

    def mount(name: str, options: str) -> Path:
        target = tmp_path / name
        target.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True,
                              text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): the filesystem "
                        "rows need root (or CAP_SYS_ADMIN) to make a full or read-only disk")
        mounted.append(target)
        return target

    yield mount
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def qita(*args, cwd: Path):
    import os
    import subprocess
    import sys

    from tests.platform.conftest import REPO

    return subprocess.run([sys.executable, "-m", "qitos.cli.qita", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize(("where", "says"), [
    ("output", ["--output ro/r.jsonl: cannot write there (read-only file system", "choose a writable place with --output"]),
    ("trace-logdir", ["cannot write traces to 'ro/runs'", "Read-only file system", "--trace-logdir"]),
    ("default output", ["--output (default) results/", "cannot write there (read-only file system at", "/ro)"]),
])
def test_a_read_only_place_is_one_line_before_anything_runs(tmp_path, tmpfs, where, says):
    from tests.platform.conftest import write_tasks

    tmpfs("ro", "size=64k,ro")
    write_tasks(tmp_path / "tasks.jsonl", 3)
    places = {"output": ["--output", "ro/r.jsonl", "--trace-logdir", "runs"],
              "trace-logdir": ["--output", "r.jsonl", "--trace-logdir", "ro/runs"],
              "default output": ["--trace-logdir", "../runs"]}[where]
    cwd = tmp_path / "ro" if where == "default output" else tmp_path
    done = qit("bench", "run", "-b", "jsonl", "--root", tmp_path / "tasks.jsonl", *ORACLE, *places, cwd=cwd)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("warning:")]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error: ") and all(s in lines[0] for s in says), lines[0]
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["board", "--port", "99999"], "--port 99999: a port is 1 to 65535"),
    (["board", "--port", "65536"], "--port 65536: a port is 1 to 65535"),
    (["board", "--port", "-1"], "--port -1: a port is 1 to 65535"),
    (["replay", "--run", "runs/r1", "--port", "70000"], "--port 70000: a port is 1 to 65535"),
    (["board", "--port", "{taken}"], "is in use"),
    (["board", "--host", "no-such-host.invalid"], "check --host"),
    (["board", "--results", "runs"], "runs: is a directory; give results JSONL file(s)"),
])
def test_board_port_and_path_errors_are_one_line(tmp_path, args, says):
    import socket

    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "manifest.json").write_text(json.dumps({"run_id": "r1"}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        done = qita(*[a.replace("{taken}", port) for a in args], *(["--logdir", "runs"] if args[0] == "board" else []),
                    cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and says in line, line


def test_jsonl_tasks_that_run_unscored_or_carry_ignored_keys_are_named(tmp_path):
    """A row with no answer runs unscored, a key QitOS does not read is ignored: one warning line each,
    naming the file and the lines; the run itself goes ahead."""
    lines = [{"id": "t0", "question": "1+1?", "answer": "2"}, {"id": "t1", "question": "2+2?"},
             {"id": "t2", "question": "3+3?", "answer": "6", "difficulty": "easy"}]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = qit("bench", "run", "-b", "jsonl", "--root", "tasks.jsonl", *ORACLE, "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning: tasks.jsonl")]
    assert len(warned) == 2, done.stderr
    assert "1 task(s) have no 'answer' (line 2 (t1))" in warned[0] and "unscored" in warned[0]
    assert "key(s) difficulty are ignored" in warned[1]
    unscored = {r["task_id"]: r["success"] for r in rows(tmp_path / "r.jsonl")}
    assert unscored == {"t0": True, "t1": None, "t2": True}


@pytest.mark.parametrize("full", ["traces", "results and traces", "results and traces, --workers 2"])
def test_a_disk_that_fills_is_one_line_nothing_lost_and_a_plain_rerun_finishes(tmp_path, tmpfs, full):
    """Traces (and maybe the results file) on a 200 KiB tmpfs, 40 tasks: the run ends with one line naming the
    place and the fix (no traceback; exit 3, tasks left to run, or 1 when the results file of a one-process run filled); tasks whose traces could not be written are `disk_full`, unscored;
    after space is freed the same command runs exactly the tasks without a finished row."""
    import subprocess

    from tests.platform.conftest import write_tasks

    tiny = tmpfs("tiny", "size=200k")
    write_tasks(tmp_path / "tasks.jsonl", 40)
    output = "r.jsonl" if full == "traces" else "tiny/r.jsonl"
    workers = ("--workers", "2", "--concurrency", "4") if "--workers" in full else ()
    command = ("bench", "run", "-b", "jsonl", "--root", "tasks.jsonl", *ORACLE, "--output", output,
               "--trace-logdir", "tiny/runs", *workers)
    done = qit(*command, cwd=tmp_path)
    assert done.returncode == (1 if full == "results and traces" else 3) and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors and all("free some space" in e and "the same command" in e for e in errors), done.stderr
    assert len(errors) == 1 or workers, done.stderr  # one line (a line per worker process that stopped)
    assert workers or "tiny/runs" in errors[0]  # the place that filled
    first = [json.loads(line) for line in (tmp_path / output).read_text().splitlines() if line.endswith("}")]
    assert all(r["success"] is None for r in first if r["stop_reason"] == "disk_full")
    assert not any(r["stop_reason"] == "error" for r in first)  # a full disk is never the agent's failure
    if full == "traces":
        assert any(r["stop_reason"] == "disk_full" for r in first) and len(first) == 40
    subprocess.run(["mount", "-o", "remount,size=20m", str(tiny)], check=True)  # space freed
    again = qit(*command, cwd=tmp_path)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    final = [json.loads(line) for line in (tmp_path / output).read_text().splitlines() if line.endswith("}")]
    finished = [r["task_id"] for r in final if r["stop_reason"] != "disk_full"]
    assert sorted(finished) == sorted(f"t{i}" for i in range(40))  # each task finished exactly once
    assert all(r["success"] is True for r in final if r["stop_reason"] != "disk_full")


@pytest.mark.parametrize(("code", "says", "exit_code"), [
    ("ENOSPC", "the disk is full; free some space", 1),
    ("EDQUOT", "the disk is full; free some space", 1),
    ("EROFS", "read-only file system", 2),
    ("EISDIR", "a directory is where a file is expected", 2),
    ("ENOTDIR", "a file is where a folder is expected", 2),
    ("EACCES", "permission denied", 2),
    ("ENAMETOOLONG", "the name is too long", 2),
    ("EMFILE", "too many open files", 1),
])
def test_each_filesystem_error_is_worded_with_its_path(code, says, exit_code):
    import errno
    import os

    from qitos.cli.errors import os_error_line

    number = getattr(errno, code)
    line, exit_with = os_error_line(OSError(number, os.strerror(number), "out/r.jsonl"))
    assert "out/r.jsonl" in line and says in line and "\n" not in line and exit_with == exit_code


def test_an_oserror_that_is_not_the_filesystems_is_left_alone():
    from qitos.cli.errors import os_error_line

    assert os_error_line(ConnectionRefusedError(111, "Connection refused")) is None

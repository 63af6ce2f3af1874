"""Results files a crash cut short: appends stay readable, a run sets the cut line aside and re-runs its task.

Unit tests drive `results_tail` and `ResultsFile` on crafted bytes; the end-to-end tests cut a real row
(and kill a real worker in the middle of its write), then run `qit bench run`, `eval`, `export` and the
board as a user would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qitos.results import tail as results_tail
from qitos.results.rows import BenchmarkRunResult, ResultsFile, iter_numbered_rows
from tests.platform.conftest import REPO, qit, rows, write_tasks
from tests.support.board import board, page


def row_bytes(task: str, trial: int = 0, **extra) -> bytes:
    row = BenchmarkRunResult(task_id=task, benchmark="jsonl", split="default", trial=trial, stop_reason="final",
                             success=True, score=1.0, **extra)
    return row.model_dump_json().encode() + b"\n"


# -- unit: finding cut lines ------------------------------------------------------------------------------

def test_a_whole_file_has_no_cut_lines():
    data = row_bytes("a") + row_bytes("b")
    assert results_tail.find_cut_lines(data) == []
    assert results_tail.find_cut_lines(data[:-1]) == []  # the last row lacks only its newline: not cut
    assert results_tail.find_cut_lines(b"") == []


def test_a_cut_last_line_names_its_task_and_trial():
    whole = row_bytes("a")
    cut_row = row_bytes("t/7", trial=3)
    data = whole + cut_row[:90]
    [cut] = results_tail.find_cut_lines(data)
    assert cut.line == 2 and cut.fragment == cut_row[:90] and cut.recovered == ()
    assert (cut.task_id, cut.trial) == ("t/7", 3)
    assert results_tail.find_cut_lines(whole + b'{"tas')[0].task_id is None  # too little left to name it


def test_a_row_glued_onto_a_fragment_is_recovered():
    """What appends before the leading newline did: the next row went onto the fragment's line."""
    frag, glued = row_bytes("a")[:40], row_bytes("b")
    [cut] = results_tail.find_cut_lines(row_bytes("z") + frag + glued)
    assert cut.line == 2 and cut.fragment == frag and cut.recovered == (glued[:-1],)
    assert [r["task_id"] for r in cut.recovered_rows()] == ["b"]
    # a row that lacked only its newline, then a glued row: both whole, nothing to set aside
    [split] = results_tail.find_cut_lines(row_bytes("a")[:-1] + row_bytes("b"))
    assert split.fragment == b"" and len(split.recovered) == 2


def test_lines_that_are_not_rows_are_left_to_the_readers():
    data = row_bytes("a") + b"garbage\n" + b'{"no_task": 1}\n' + b"[1, 2]\n" + row_bytes("b")
    assert results_tail.find_cut_lines(data) == []
    [cut] = results_tail.find_cut_lines(row_bytes("a") + b"{not json\n" + row_bytes("b"))
    assert cut.line == 2  # starts like a row and does not parse: cut (set aside, never dropped)


def test_a_cut_multibyte_character_is_kept_byte_for_byte():
    whole = row_bytes("é", prediction="日本語の答え")
    frag = whole[:whole.index("答".encode()) + 1]  # ends inside a character
    [cut] = results_tail.find_cut_lines(frag + row_bytes("b"))
    assert cut.fragment == frag and len(cut.recovered) == 1


# -- unit: repairing and appending ---------------------------------------------------------------------------

def test_repair_moves_a_cut_tail_aside_and_appends_to_damaged(tmp_path):
    path = tmp_path / "r.jsonl"
    whole, frag = row_bytes("a"), row_bytes("b")[:50]
    path.write_bytes(whole + frag)
    damaged = tmp_path / "r.jsonl.damaged"
    damaged.write_bytes(b"an earlier fragment")  # appended to, never replaced (and no newline at its end)
    inode = path.stat().st_ino
    [cut] = ResultsFile(path).repair()
    assert cut.line == 2
    assert path.read_bytes() == whole and path.stat().st_ino == inode  # truncated in place
    assert damaged.read_bytes() == b"an earlier fragment\n" + frag + b"\n"
    assert ResultsFile(path).repair() == []  # nothing left to repair
    assert damaged.read_bytes() == b"an earlier fragment\n" + frag + b"\n"


def test_repair_rewrites_when_the_cut_line_is_in_the_middle(tmp_path):
    path = tmp_path / "r.jsonl"
    a, b, c = row_bytes("a"), row_bytes("b"), row_bytes("c")
    frag = row_bytes("x")[:30]
    path.write_bytes(a + frag + b"\n" + b + frag + c + b"garbage\n")
    cut = ResultsFile(path).repair()
    assert [x.line for x in cut] == [2, 4]
    assert path.read_bytes() == a + b + c + b"garbage\n"  # the glued row kept, the foreign line left alone
    assert (tmp_path / "r.jsonl.damaged").read_bytes() == frag + b"\n" + frag + b"\n"
    assert not (tmp_path / "r.jsonl.tmp").exists()


def test_append_after_a_cut_write_starts_a_new_line(tmp_path):
    path = tmp_path / "r.jsonl"
    frag = row_bytes("a")[:45]
    path.write_bytes(row_bytes("z") + frag)
    ResultsFile(path).append(BenchmarkRunResult(task_id="b", benchmark="jsonl", stop_reason="final"))
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == frag and json.loads(lines[2])["task_id"] == "b" and lines[3] == b""
    issues = []
    assert [r["task_id"] for _, r in iter_numbered_rows(path, issues)] == ["z", "b"]
    [issue] = issues
    assert issue.line == 2 and "cut short" in issue.message and str(path) in str(issue)


def test_existing_reads_rows_glued_to_a_fragment(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(row_bytes("a") + row_bytes("b")[:33] + row_bytes("c"))
    results = ResultsFile(path)
    assert sorted(r["task_id"] for r in results.existing()) == ["a", "c"]
    assert [c.line for c in results.cut] == [2]
    assert path.read_bytes() == row_bytes("a") + row_bytes("b")[:33] + row_bytes("c")  # reading changes nothing


def test_retry_errors_rewrite_keeps_bytes_it_cannot_read(tmp_path):
    path = tmp_path / "r.jsonl"
    err = BenchmarkRunResult(task_id="e", benchmark="jsonl", stop_reason="error").model_dump_json().encode() + b"\n"
    odd = "caf\xe9 not utf-8 \u2603".encode("latin-1", "replace") + b"\n"
    path.write_bytes(row_bytes("a") + odd + err + row_bytes("b")[:-1])
    assert ResultsFile(path).rewrite_without({("e", 0)}) == 1
    assert path.read_bytes() == row_bytes("a") + odd + row_bytes("b")


def test_an_append_waiting_on_the_lock_follows_a_rewrite(tmp_path):
    """A repair renames a new file over the one an appender in another process waits to lock: the
    appender must write to the new file, or its row would vanish with the old one."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(row_bytes("a") + row_bytes("x")[:20] + b"\n" + row_bytes("b"))
    import fcntl

    holder = os.open(path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # this test plays the repair: lock, then rename a new file over
    script = ("import sys; from pathlib import Path; from qitos.results.rows import ResultsFile, "
              "BenchmarkRunResult as R; ResultsFile(Path(sys.argv[1])).append(R(task_id='late', "
              "benchmark='jsonl', stop_reason='final'))")
    child = subprocess.Popen([sys.executable, "-c", script, str(path)], env={**os.environ, "PYTHONPATH": str(REPO)})
    time.sleep(1.0)  # the child is blocked on the old file's lock
    assert child.poll() is None
    results_tail.replace_locked(path, row_bytes("a") + row_bytes("b"))
    os.close(holder)
    assert child.wait(timeout=30) == 0
    assert [r["task_id"] for r in rows(path)] == ["a", "b", "late"]


# -- end to end: qit bench run / eval / export, the board -------------------------------------------------

ORACLE = ("--runner", "tests.support.runners:oracle", "--validator")


def cut_last_row(path: Path, keep: int = 110) -> bytes:
    """Cut the file's last row after `keep` bytes, as a kill in the middle of its write leaves it."""
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[:start + keep])
    return data[start:start + keep]


def test_rerun_sets_a_cut_row_aside_and_runs_its_task_again(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
    first = qit("bench", "run", "-b", "jsonl", "--root", tasks, *ORACLE, "--output", "r.jsonl", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "r.jsonl"
    lost = json.loads(out.read_text().splitlines()[-1])
    frag = cut_last_row(out)

    eval_cut = qit("bench", "eval", "--input", "r.jsonl", cwd=tmp_path)  # readers name file and line
    assert eval_cut.returncode == 0 and "note: r.jsonl line 4: not valid JSON" in eval_cut.stdout
    assert "[yellow]" not in eval_cut.stdout and "cut short" in eval_cut.stdout
    csv = qit("bench", "export", "--input", "r.jsonl", "--format", "csv", cwd=tmp_path)
    assert csv.returncode == 0 and len(csv.stdout.splitlines()) == 4  # header + the 3 readable rows
    assert "note: r.jsonl line 4: not valid JSON" in csv.stderr

    dry = qit("bench", "run", "-b", "jsonl", "--root", tasks, *ORACLE, "--output", "r.jsonl", "--dry-run",
              cwd=tmp_path)
    assert dry.returncode == 0 and "1 to run, 3 already done" in dry.stdout
    assert "a run moves it to r.jsonl.damaged" in dry.stderr
    assert out.read_bytes().endswith(frag) and not (tmp_path / "r.jsonl.damaged").exists()  # dry: nothing written

    again = qit("bench", "run", "-b", "jsonl", "--root", tasks, *ORACLE, "--output", "r.jsonl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "1 to run, 3 already done" in again.stdout
    warning = [line for line in again.stderr.splitlines() if "cut short" in line]
    assert warning == [f"warning: r.jsonl line 4: task {lost['task_id']} trial 0 was cut short (a write interrupted "
                       "by a crash): moved to r.jsonl.damaged; it runs again"]
    assert (tmp_path / "r.jsonl.damaged").read_bytes() == frag + b"\n"
    final = rows(out)  # every line reads, and one row per task
    assert sorted(r["task_id"] for r in final) == ["t0", "t1", "t2", "t3"] and final[-1]["task_id"] == lost["task_id"]
    clean = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path)
    assert json.loads(clean.stdout)["issues"] == [] and json.loads(clean.stdout)["rows"] == 4


def test_a_results_file_glued_by_an_older_version_loses_no_row(tmp_path):
    """Issue 26 item 7 as written: the next row was appended onto the cut line and could not be read."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    assert qit("bench", "run", "-b", "jsonl", "--root", tasks, *ORACLE, "--output", "r.jsonl", "--limit", "2",
               cwd=tmp_path).returncode == 0
    out = tmp_path / "r.jsonl"
    lines = out.read_bytes().splitlines(keepends=True)
    frag = lines[1][:50]
    out.write_bytes(lines[0] + frag + lines[1])  # a write cut short, then that task's rerun glued onto it
    again = qit("bench", "run", "-b", "jsonl", "--root", tasks, *ORACLE, "--output", "r.jsonl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "1 to run, 2 already done" in again.stdout  # t1's glued row counts: only t2 runs
    assert "1 whole row(s) glued to it kept" in again.stderr
    assert [r["task_id"] for r in rows(out)] == [json.loads(lines[0])["task_id"], json.loads(lines[1])["task_id"], "t2"]
    assert (tmp_path / "r.jsonl.damaged").read_bytes() == frag + b"\n"


def test_killing_qit_in_the_middle_of_a_row_write_loses_nothing(tmp_path):
    """A real cut: `qit bench run` writes its rows a byte at a time here and is SIGKILLed once the first row
    is half written; the board names the cut line, and the rerun sets it aside and runs that task again."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    out = tmp_path / "r.jsonl"
    # the runner's own append, slowed to write one byte at a time (so the kill lands in the middle)
    script = tmp_path / "slow_append.py"
    script.write_text(
        "import os, runpy, sys\n"
        "_write = os.write\n"
        "def slow(fd, data):\n"
        "    if len(data) > 100 and os.environ.get('SLOW_WRITE') and os.readlink(f'/proc/self/fd/{fd}')"
        ".endswith('r.jsonl'):\n"
        "        import time; n = _write(fd, bytes(data[:1])); time.sleep(0.01); return n\n"
        "    return _write(fd, data)\n"
        "os.write = slow\n"
        "sys.argv = ['qit', *sys.argv[1:]]\n"
        "runpy.run_module('qitos.cli.qit', run_name='__main__')\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "SLOW_WRITE": "1"}
    proc = subprocess.Popen([sys.executable, str(script), "bench", "run", "-b", "jsonl", "--root", str(tasks),
                             *ORACLE, "--output", "r.jsonl", "--concurrency", "1"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or out.stat().st_size < 110):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    data = out.read_bytes()
    assert data and not data.endswith(b"\n"), "the kill did not land inside a write"
    first_task = json.loads(tasks.read_text().splitlines()[0])["id"]

    board_issue = _board_results_issue(tmp_path, out)
    assert f"{out} line 1: not valid JSON" in board_issue

    again = qit("bench", "run", "-b", "jsonl", "--root", tasks, *ORACLE, "--output", "r.jsonl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"r.jsonl line 1: task {first_task} trial 0 was cut short" in again.stderr
    assert (tmp_path / "r.jsonl.damaged").read_bytes() == data + b"\n"
    assert sorted(r["task_id"] for r in rows(out)) == ["t0", "t1", "t2"]


def _board_results_issue(tmp_path: Path, results: Path) -> str:
    """The board's runs page for `results`, as `qita board` serves it."""
    (tmp_path / "runs").mkdir(exist_ok=True)
    with board("--logdir", str(tmp_path / "runs"), "--results", str(results), "--cache-dir", str(tmp_path / "cache"),
               cwd=tmp_path) as url:
        return page(url + "/runs")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

"""The group flusher makes exactly what was written durable: the files and the directories naming them.

It fsyncs paths, never the whole filesystem (`syncfs` waits for every other process's dirty pages and
left killed workers stuck exiting on a busy CI machine)."""

from __future__ import annotations

import os

from qitos.trace import durability
from qitos.trace.writer import TraceWriter


def _recording(monkeypatch) -> list[str]:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(durability.os, "fsync", fsync)
    return synced


def test_a_row_file_is_flushed_with_its_directory(tmp_path, monkeypatch):
    synced = _recording(monkeypatch)
    flusher = durability.Flusher(interval=3600)
    rows = tmp_path / "results" / "rows.jsonl"
    rows.parent.mkdir()
    rows.write_text("{}\n")
    flusher.sync(flusher.mark_dirty(rows))
    assert synced == [str(rows), str(rows.parent)]  # file first, then the entry naming it
    flusher.sync()  # nothing new: no second flush
    assert len(synced) == 2


def test_a_trace_flush_covers_its_three_files_and_folders_only(tmp_path, monkeypatch):
    synced = _recording(monkeypatch)
    flusher = durability.Flusher(interval=3600)
    monkeypatch.setattr("qitos.trace.writer.FLUSHER", flusher)
    (tmp_path / "other.txt").write_text("not ours")
    writer = TraceWriter(tmp_path, "run-1")
    writer.write_manifest()
    flusher.sync()
    run = tmp_path / "run-1"
    assert set(synced) == {str(run / "events.jsonl"), str(run / "steps.jsonl"), str(run / "manifest.json"),
                           str(run), str(tmp_path)}
    assert synced.index(str(run)) > synced.index(str(run / "manifest.json"))


def test_concurrent_syncs_share_one_flush(tmp_path, monkeypatch):
    synced = _recording(monkeypatch)
    flusher = durability.Flusher(interval=3600)
    for i in range(5):
        (tmp_path / f"{i}.jsonl").write_text("x")
        flusher.mark_dirty(tmp_path / f"{i}.jsonl")
    flusher.sync(1)  # the first ticket's flush carries the other four writes too
    assert len(synced) == 6
    flusher.sync(5)
    assert len(synced) == 6


def test_rows_are_committed_only_once_durable_and_all_of_them(tmp_path, monkeypatch):
    """The batch's committer (benchmark/commit.py): a job's slot hands its written row over and takes its next task;
    the row's trace is sealed and the row counted only once its flush made it durable. Every row is committed,
    a failure to commit one is raised by `drain` (and the next `submit`), and the rest are still committed."""
    import threading

    import pytest

    from qitos.results import commit

    flusher = durability.Flusher(interval=3600)
    monkeypatch.setattr(commit, "FLUSHER", flusher)
    synced = _recording(monkeypatch)
    gate = threading.Event()
    real_flush = flusher.sync_paths

    def slow_flush(paths):  # the disk is slow: the slots must not wait for it
        gate.wait(10)
        real_flush(paths)

    monkeypatch.setattr(flusher, "sync_paths", slow_flush)
    committed: list[tuple[int, bool]] = []

    def commit_row(index: int, path: str) -> None:
        if index == 3:
            raise OSError("the trace could not be sealed")
        committed.append((index, path in synced))  # its file was flushed before it was committed

    committer = commit.RowCommitter(commit_row)
    paths = []
    for index in range(6):
        path = tmp_path / f"row{index}.jsonl"
        path.write_text("{}\n")
        paths.append(str(path))
        committer.submit([str(path)], index, str(path))  # returns at once: the flush is held
    assert committed == []
    gate.set()
    with pytest.raises(OSError, match="could not be sealed"):
        committer.drain()
    assert sorted(committed) == [(0, True), (1, True), (2, True), (4, True), (5, True)]
    with pytest.raises(OSError):
        committer.submit([paths[0]], 6, paths[0])


def test_a_commit_flushes_its_rows_and_their_traces_not_the_runs_in_flight(tmp_path, monkeypatch):
    """A row's commit makes the results file and that row's trace durable; a run still being written stays dirty
    for the background flush (flushing every dirty file made each commit fsync every run in flight)."""
    from qitos.results import commit

    synced = _recording(monkeypatch)
    flusher = durability.Flusher(interval=3600)
    monkeypatch.setattr("qitos.trace.writer.FLUSHER", flusher)
    monkeypatch.setattr(commit, "FLUSHER", flusher)
    finished, running = TraceWriter(tmp_path / "runs", "done-1"), TraceWriter(tmp_path / "runs", "busy-2")
    for writer in (finished, running):
        writer.write_manifest()
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    committed = []
    committer = commit.RowCommitter(lambda name: committed.append((name, set(synced))))
    committer.submit(commit.row_paths(rows, str(finished.run_dir)), "done-1")
    committer.drain()
    (name, flushed), = committed
    run = finished.run_dir
    assert flushed == {str(rows), str(run / "events.jsonl"), str(run / "steps.jsonl"),  # not the folder naming
                       str(run / "manifest.json"), str(run), str(tmp_path / "runs")}  # the results (see below)
    assert not any("busy-2" in path for path in synced)
    flusher.sync()  # the background flush: the run in flight's files, not the committed ones again
    assert {p for p in synced if "busy-2" in p} == {str(running.run_dir / n) for n in
                                                     ("events.jsonl", "steps.jsonl", "manifest.json")} | {
        str(running.run_dir)}
    assert synced.count(str(run / "manifest.json")) == 1


def test_a_commit_skips_the_writers_spare_manifest(tmp_path, monkeypatch):
    """A run finalized for a later seal keeps its previous manifest under a hidden temporary name (the seal writes
    there): flushing it made nothing durable, so a commit leaves it out."""
    from qitos.results import commit
    from qitos.trace.schema import RunSummary

    writer = TraceWriter(tmp_path / "runs", "held-1")
    writer.hold_status = True
    writer.write_manifest()
    writer.finalize("completed", RunSummary(stop_reason="final"))
    hidden = [p.name for p in writer.run_dir.iterdir() if p.name.startswith(".")]
    assert hidden  # the spare the seal will write into
    paths = commit.row_paths(tmp_path / "rows.jsonl", str(writer.run_dir))
    assert not any(os.path.basename(p).startswith(".") for p in paths)
    assert str(writer.run_dir / "manifest.json") in paths and str(writer.run_dir) in paths


def test_a_commit_flushes_the_sources_and_screenshots_a_trace_keeps(tmp_path, monkeypatch):
    """A row says its trace is complete only once all of it is on disk: the screenshots in `assets/` too, and the
    folders naming them and the sources in `agent_code/` (a crash after the commit could lose them)."""
    from qitos.results import commit

    synced = _recording(monkeypatch)
    flusher = durability.Flusher(interval=3600)
    monkeypatch.setattr(commit, "FLUSHER", flusher)
    writer = TraceWriter(tmp_path / "runs", "kept-1")
    writer.write_manifest()
    run = writer.run_dir
    for folder, name in (("agent_code", "000_agent.py"), ("agent_code", "index.json"), ("assets", "ab.png")):
        (run / folder).mkdir(exist_ok=True)
        (run / folder / name).write_bytes(b"x")
    (run / "assets" / ".partial").write_bytes(b"hidden: not ours to flush")
    committer = commit.RowCommitter(lambda: None)
    committer.submit(commit.row_paths(tmp_path / "rows.jsonl", str(run)))
    committer.drain()
    kept = {str(run / "agent_code"), str(run / "assets" / "ab.png"), str(run / "assets")}
    assert kept <= set(synced) and not any(p.endswith(".partial") for p in synced)
    # the sources and their index are links to files flushed once for the batch, or copies flushed when made
    assert not {str(run / "agent_code" / "000_agent.py"), str(run / "agent_code" / "index.json")} & set(synced)
    assert synced.index(str(run / "assets")) > synced.index(str(run / "assets" / "ab.png"))  # a file, its folder,
    assert synced.index(str(run)) > max(synced.index(str(run / "assets")), synced.index(str(run / "agent_code")))


def test_the_results_folder_is_flushed_once_when_the_file_is_new(tmp_path, monkeypatch):
    """The folder naming the results file needs a flush only when the name is new: the first append flushes it, later
    ones flush only the file (each commit used to flush the folder too)."""
    from qitos.results.rows import BenchmarkRunResult, ResultsFile

    synced = _recording(monkeypatch)
    flusher = durability.Flusher(interval=3600)
    monkeypatch.setattr("qitos.results.rows.FLUSHER", flusher)
    results = ResultsFile(tmp_path / "out" / "rows.jsonl")

    def row(index: int) -> BenchmarkRunResult:
        return BenchmarkRunResult(task_id=f"t{index}", benchmark="jsonl", trial=0, stop_reason="final", success=True)

    results.append(row(0))
    assert synced == [str(tmp_path / "out"), str(results.path)]  # the new name, then the row
    synced.clear()
    results.append(row(1))
    results.append(row(2), wait=False)
    flusher.sync()
    assert synced == [str(results.path), str(results.path)]  # the file alone, never its folder again


def test_rows_finishing_close_together_share_one_flush_and_drain_does_not_linger(monkeypatch):
    """The committer waits a moment after a row arrives (`LINGER_SECONDS`) so the next rows share its flush; a
    drain (no row will follow) commits at once."""
    import time

    from qitos.results import commit

    flushes: list[set[str]] = []
    monkeypatch.setattr(commit.FLUSHER, "sync_paths", lambda paths: flushes.append(set(paths)))
    committed: list[str] = []
    committer = commit.RowCommitter(committed.append)
    committer.submit(["/rows", "/trace-a"], "a")
    time.sleep(commit.LINGER_SECONDS / 4)
    committer.submit(["/rows", "/trace-b"], "b")
    deadline = time.monotonic() + 5
    while len(committed) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert committed == ["a", "b"] and flushes == [{"/rows", "/trace-a", "/trace-b"}]

    monkeypatch.setattr(commit, "LINGER_SECONDS", 30.0)
    started = time.monotonic()
    committer.submit(["/rows", "/trace-c"], "c")
    committer.drain()
    assert committed[-1] == "c" and time.monotonic() - started < 5


def test_the_background_flush_takes_only_what_has_waited(tmp_path, monkeypatch):
    """The background flush takes the paths dirty for at least its interval: a run that ends sooner is flushed once,
    by its row's commit, not also as a run in flight. `sync()` still takes everything."""
    import time

    synced = _recording(monkeypatch)
    flusher = durability.Flusher(interval=3600)  # the loop never runs here: its flush is called directly
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    for path in (old, new):
        path.write_text("x\n")
    flusher.mark_files([str(old)])
    time.sleep(0.02)
    between = time.monotonic()
    time.sleep(0.02)
    ticket = flusher.mark_files([str(new)])
    flusher._flush(older_than=between)
    assert synced == [str(old)]
    synced.clear()
    flusher.sync(ticket)  # the background's partial flush did not count the newer write as durable
    assert synced == [str(new)]

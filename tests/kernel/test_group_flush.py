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
    real_flush = flusher._flush

    def slow_flush():  # the disk is slow: the slots must not wait for it
        gate.wait(10)
        real_flush()

    monkeypatch.setattr(flusher, "_flush", slow_flush)
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
        committer.submit(flusher.mark_dirty(path), index, str(path))  # returns at once: the flush is held
    assert committed == []
    gate.set()
    with pytest.raises(OSError, match="could not be sealed"):
        committer.drain()
    assert sorted(committed) == [(0, True), (1, True), (2, True), (4, True), (5, True)]
    with pytest.raises(OSError):
        committer.submit(flusher.mark_dirty(paths[0]), 6, paths[0])

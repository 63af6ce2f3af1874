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

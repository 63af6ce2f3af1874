"""The trace writer's files: manifest rewrites reuse one spare file (no inode freed per rewrite), the end
leaves only the three trace files, and the integrity check catches lines lost or added behind its back."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from qitos.trace.schema import RunSummary
from qitos.trace.swap import exchange
from qitos.trace.writer import TraceWriter


def test_exchange_swaps_two_files_atomically(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("new")
    b.write_text("old")
    inode_a, inode_b = a.stat().st_ino, b.stat().st_ino
    swapped = exchange(a, b)
    if not sys.platform.startswith("linux"):
        assert not swapped and b.read_text() == "old", "elsewhere: report it cannot, and touch nothing"
        return
    assert swapped, "Linux filesystems used for traces (ext4, xfs, btrfs, tmpfs) support RENAME_EXCHANGE"
    assert b.read_text() == "new" and a.read_text() == "old"
    assert b.stat().st_ino == inode_a and a.stat().st_ino == inode_b


def test_exchange_with_a_missing_file_is_an_error_not_a_silent_success(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    if sys.platform.startswith("linux"):
        with pytest.raises(FileNotFoundError):
            exchange(tmp_path / "a", tmp_path / "missing")


def test_manifest_rewrites_reuse_two_inodes_and_the_end_leaves_three_files(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "run_t_0_20260101T000000_abcdef", fsync=False)
    manifest = writer.run_dir / "manifest.json"
    inodes = set()
    for step in range(6):
        writer.step({"step_id": step + 1})
        inodes.add(manifest.stat().st_ino)
        assert json.loads(manifest.read_text())["step_count"] == step + 1  # always whole and current
    if sys.platform.startswith("linux"):
        assert len(inodes) <= 2, f"each rewrite freed an inode: {len(inodes)} different manifests"
    writer.finalize("completed", RunSummary(stop_reason="final", steps=6))
    assert sorted(os.listdir(writer.run_dir)) == ["events.jsonl", "manifest.json", "steps.jsonl"]
    assert json.loads(manifest.read_text())["status"] == "completed"


def test_the_manifest_files_stay_open_between_rewrites_and_close_at_the_end(tmp_path: Path) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_fds()
    writer = TraceWriter(tmp_path, "run_t_0_20260101T000000_abcdef", fsync=False)
    for step in range(4):
        writer.step({"step_id": step + 1})
    assert open_fds() == before + 4  # events, steps and the two manifest files
    writer.finalize("completed", RunSummary(stop_reason="final", steps=4))
    assert open_fds() == before
    dropped = TraceWriter(tmp_path, "run_t_0_20260101T000000_fedcba", fsync=False)
    dropped.step({"step_id": 1})
    dropped.step({"step_id": 2})
    dropped._close_manifest_fds()  # what dropping an unfinalized writer does (__del__)
    assert open_fds() == before + 2


def test_held_lines_go_out_together_and_before_any_manifest_that_counts_them(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "run_t_0_20260101T000000_abcdef", fsync=False)
    events, manifest = writer.run_dir / "events.jsonl", writer.run_dir / "manifest.json"
    with writer.held():
        writer.event("run_start", "INIT", {"task_id": "t"})
        writer.event("model_request", "DECIDE", {"n": 1}, step_id=1)
        writer.step({"step_id": 1})  # its manifest rewrite waits for the block's end, after the lines
        writer.event("run_end", "END", {"status": "completed"})
        writer.write_manifest()
        assert events.read_text() == "" and not manifest.exists()  # held
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3]
    written = json.loads(manifest.read_text())  # one rewrite, counting every line written before it
    assert (written["event_count"], written["step_count"]) == (3, 1)
    assert writer.integrity() == (True, "3 events, 1 steps")


def test_a_batch_that_ends_the_run_leaves_its_manifest_rewrite_to_finalize(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "run_t_0_20260101T000000_abcdef", fsync=False)
    manifest = writer.run_dir / "manifest.json"
    writer.write_manifest()
    with writer.held(manifest_follows=True):
        writer.event("run_end", "END", {"status": "completed"})
        writer.step({"step_id": 1})
    assert json.loads(manifest.read_text())["step_count"] == 0  # the steps file holds it; the manifest is next
    assert len((writer.run_dir / "steps.jsonl").read_text().splitlines()) == 1
    writer.finalize("completed", RunSummary(stop_reason="final"))
    assert json.loads(manifest.read_text())["step_count"] == 1
    with writer.held():  # after the end nothing is rewritten
        writer.write_manifest()
    assert json.loads(manifest.read_text())["status"] == "completed"


def test_integrity_counts_the_bytes_it_wrote(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "run_t_0_20260101T000000_abcdef", fsync=False)
    writer.write_manifest()
    writer.event("run_start", "INIT", {"task_id": "t"})
    writer.step({"step_id": 1})
    assert writer.integrity() == (True, "1 events, 1 steps")
    with open(writer.run_dir / "events.jsonl", "a") as fh:
        fh.write('{"seq": 99}\n')  # a line the writer did not write
    ok, detail = writer.integrity()
    assert not ok and "events.jsonl holds" in detail
    other = TraceWriter(tmp_path, "run_t_0_20260101T000000_fedcba", fsync=False)
    other.write_manifest()
    os.unlink(other.run_dir / "steps.jsonl")
    assert other.integrity() == (False, "steps.jsonl missing")


def test_a_live_pid_that_is_another_process_means_the_run_was_interrupted(tmp_path: Path) -> None:
    from qitos.trace.reader import effective_status

    writer = TraceWriter(tmp_path, "run_t_0_20260101T000000_abcdef", fsync=False)
    assert writer.manifest.writer["pid"] == os.getpid()
    assert effective_status(writer.manifest) == "running"  # this very process is writing it
    if not sys.platform.startswith("linux"):
        assert writer.manifest.writer["started"] is None  # no /proc: only the PID can be checked
        return
    # The writer died and the system gave its PID to another process: same number, another start time.
    reused = writer.manifest.model_copy(update={"writer": {**writer.manifest.writer,
                                                           "started": writer.manifest.writer["started"] - 1}})
    assert effective_status(reused) == "interrupted"
    older = writer.manifest.model_copy(update={"writer": {"pid": os.getpid(), "host": writer.manifest.writer["host"]}})
    assert effective_status(older) == "running", "manifests written before start times were recorded still work"


def test_a_writer_dropped_unfinalized_keeps_no_descriptor(tmp_path: Path) -> None:
    """A run that crashed on the way drops its writer: none of its files stays open (a long batch of such runs
    would otherwise run out of descriptors)."""
    import gc

    def open_here() -> list[str]:
        """This process's descriptors on files under tmp_path (a count of all of them also saw other threads'
        files come and go: CI once counted 18 against 17)."""
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            if target.startswith(str(tmp_path)):
                found.append(target)
        return found

    for i in range(20):
        writer = TraceWriter(tmp_path, f"crashed{i}")
        writer.event("run_start", "INIT", {})
        assert open_here(), "the check sees a live writer's files"
        del writer
    gc.collect()
    assert open_here() == []

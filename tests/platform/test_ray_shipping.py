"""Shipped inputs of `--executor ray` (no Ray needed): a deterministic, content-addressed archive, checked by
digest where it is unpacked, reused while in use and removed once no process has used it for a while."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time

import pytest

from qitos.run.cluster import shipping
from qitos.run.cluster.shipping import ShipmentDamaged, pack, remove_unused

from .conftest import REPO, write_tasks


@pytest.fixture
def tmp_base(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(shipping, "_HELD", {})
    return tmp_path / "tmp" / "qitos-shipped"


def test_the_same_files_pack_to_the_same_bytes(tmp_path):
    folder = tmp_path / "root"
    folder.mkdir()
    write_tasks(folder / "t.jsonl", 3)
    first = pack(folder, [folder / "t.jsonl"], "t.jsonl")
    time.sleep(1.1)  # a gzip header with a date, or member times, would differ now
    os.utime(folder / "t.jsonl")
    second = pack(folder, [folder / "t.jsonl"], "t.jsonl")
    assert first.data == second.data and first.sha256 == second.sha256 and len(first.sha256) == 64
    write_tasks(folder / "t.jsonl", 4)
    assert pack(folder, [folder / "t.jsonl"], "t.jsonl").sha256 != first.sha256


def test_a_damaged_archive_is_refused_and_a_good_one_unpacked_once(tmp_path, tmp_base):
    folder = tmp_path / "root"
    folder.mkdir()
    write_tasks(folder / "t.jsonl", 2)
    bundle = pack(folder, [folder / "t.jsonl"], "t.jsonl")
    damaged = dataclasses.replace(bundle, data=bundle.data[:-1] + bytes([bundle.data[-1] ^ 1]))
    with pytest.raises(ShipmentDamaged, match="does not match its sha256"):
        damaged.unpack()
    where = bundle.unpack()
    assert where.read_text() == (folder / "t.jsonl").read_text()
    assert where.parent == tmp_base / bundle.sha256
    marker = where.parent / ".complete"
    before = marker.stat().st_mtime_ns
    assert bundle.unpack() == where and marker.stat().st_mtime_ns == before  # reused, not unpacked again


def test_unused_copies_are_removed_and_held_ones_kept(tmp_path, tmp_base):
    folder = tmp_path / "root"
    folder.mkdir()
    write_tasks(folder / "a.jsonl", 2)
    write_tasks(folder / "b.jsonl", 3)
    a, b = (pack(folder, [folder / n], n) for n in ("a.jsonl", "b.jsonl"))
    a.unpack()  # held by this process from now on
    # another process unpacks `b` and exits: nobody holds it any more
    code = (f"import tempfile; tempfile.tempdir = {str(tmp_base.parent)!r}; import pickle, sys; "
            "from qitos.run.cluster.shipping import Bundle; pickle.loads(sys.stdin.buffer.read()).unpack()")
    import pickle

    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(b), capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_base / b.sha256).is_dir()
    assert remove_unused(tmp_base) == []  # used within the hour: kept for the next run
    old = time.time() - 2 * shipping.KEEP_SECONDS
    for sha in (a.sha256, b.sha256):
        os.utime(tmp_base / f"{sha}.lock", (old, old))
    assert remove_unused(tmp_base) == [b.sha256]
    assert not (tmp_base / b.sha256).exists() and (tmp_base / a.sha256).is_dir()

"""Read-only binds hide what "other" users may not read (a sandbox run by host root would otherwise read it):
find(1) and the Python walk find the same entries, and those are what the sandbox masks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qitos.sandbox import masks as masks


def _tree(root: Path) -> Path:
    (root / "open dir" / "closed").mkdir(parents=True)
    (root / "open dir" / "secret").write_text("gold")
    (root / "open dir" / "closed" / "inner").write_text("gold")
    (root / "open dir" / "readable").write_text("fine")
    (root / "link").symlink_to(root / "open dir" / "secret")
    os.chmod(root / "open dir" / "secret", 0o600)
    os.chmod(root / "open dir" / "closed", 0o700)
    os.chmod(root / "open dir" / "readable", 0o644)
    return root


def test_find_and_the_walk_agree(tmp_path: Path) -> None:
    root = str(_tree(tmp_path / "t"))
    masks._root_only_entries.cache_clear()
    found = masks._root_only_entries(root)
    assert found == masks._walk_root_only(root) == (
        (f"{root}/open dir/closed", True), (f"{root}/open dir/secret", False))


def test_without_find_the_walk_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(_tree(tmp_path / "t"))
    masks._root_only_entries.cache_clear()
    monkeypatch.setattr(masks.shutil, "which", lambda name: None)
    assert masks._root_only_entries(root) == masks._walk_root_only(root)
    masks._root_only_entries.cache_clear()


def test_masks_are_exactly_the_root_only_entries_and_only_for_root(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    args = masks.mask_args([str(root)])
    if os.geteuid() != 0:  # an unprivileged sandbox cannot read them anyway: nothing to mask
        assert args == []
        return
    assert f"{root}/open dir/secret" in args and f"{root}/open dir/closed" in args
    assert f"{root}/open dir/readable" not in args

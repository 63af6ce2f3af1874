"""Shared helpers of the trust tests."""

from __future__ import annotations

import shutil
from pathlib import Path


def agent_folder(tmp_path: Path, source: Path) -> Path:
    """A runner's folder as an outside author would have it: no repository, nothing but the agent's module."""
    folder = tmp_path / "agent"
    folder.mkdir()
    shutil.copy(source, folder / source.name)
    return folder

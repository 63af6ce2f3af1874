"""`qit data list` shows each source in full, whatever the terminal's width (issue 26: cut at 80 columns)."""

from __future__ import annotations

import pytest

from qitos.benchmark.data import GATED, sources
from tests.platform.conftest import qit


@pytest.mark.parametrize("columns", ["80", "60", "200"])
def test_sources_and_names_are_never_cut(tmp_path, columns):
    done = qit("data", "list", "--data-dir", tmp_path, cwd=tmp_path, env={"COLUMNS": columns})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name, source in sources().items():
        url = f"{source.archive.split('/archive/')[0]} @ {source.commit[:10]}"
        [line] = [line for line in lines if f" {name} " in line]
        assert url in line, done.stdout  # whole, on the dataset's own line: it can be copied
    assert all(any(f" {name} " in line for line in lines) for name in GATED)
    assert "…" not in done.stdout

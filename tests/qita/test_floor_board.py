"""The board shows the do-nothing floor beside the success rate, in a real browser, for real Tau-Bench airline
runs: the oracle (every task) and the null agent (exactly the floor). Screenshot: test-artifacts/qita/floor_*.png."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qitos.qita.config import BoardConfig
from qitos.qita.server import BoardServer
from tests.platform.conftest import qit

from .conftest import screenshot

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")


@pytest.fixture(scope="module")
def airline_runs(tmp_path_factory, tau_data: Path, osworld_data: Path) -> Path:
    """Two configurations of airline test: the oracle, and the null agent (one "Hi", the scripted user stops)."""
    root = tmp_path_factory.mktemp("floor-board")
    env = {"QITOS_DATA_DIR": str(tau_data.parent)}
    common = ("bench", "run", "--benchmark", "tau-bench", "--subset", "airline", "--split", "test", "--concurrency", "2",
              "--trace-logdir", "runs")
    (root / "never.jsonl").write_text('"the null agent calls no model"\n')
    for args in (("--recipe", "oracle", "--output", "results/oracle.jsonl"),
                 ("--runner", "tests.tau_bench.runners:say_hi", "--option", "user_strategy=scripted",
                  "--model-name", f"scripted:{root / 'never.jsonl'}", "--output", "results/null.jsonl")):
        done = qit(*common, *args, cwd=root, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    # and OSWorld without a VM: nothing is scored, the floor (its 30 infeasible tasks) still covers all 369
    env = {"QITOS_DATA_DIR": str(osworld_data.parent), "QITOS_OSWORLD_CONTROLLER": ""}
    done = qit("bench", "run", "--benchmark", "osworld", "--trace-logdir", "runs", "--output", "results/osworld.jsonl",
               cwd=root, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture(scope="module")
def floor_board(airline_runs: Path, tmp_path_factory):
    config = BoardConfig(logdir=airline_runs / "runs", results=sorted((airline_runs / "results").glob("*.jsonl")),
                         port=0, cache_dir=tmp_path_factory.mktemp("floor-cache"))
    server = BoardServer(config).start()
    yield server
    server.stop()


def test_the_floor_stands_beside_each_rate(floor_board, page) -> None:
    page.goto(floor_board.url("/"))
    rows = page.locator("table.configs tr.config")
    texts = sorted(rows.all_inner_texts())
    assert len(texts) == 3
    osworld = texts.pop(next(i for i, t in enumerate(texts) if "test_all" in t))
    assert "0.0%" in osworld and "do-nothing floor 8.1% (30/369)" in osworld and "coverage 0.0%" in osworld
    oracle = next(t for t in texts if "oracle" in t)
    null = next(t for t in texts if "oracle" not in t)
    assert "100.0%" in oracle and "do-nothing floor 38.0% (19/50)" in oracle
    assert re.search(r"38\.0%.*do-nothing floor 38\.0% \(19/50\)", null, re.S)  # the null agent scores the floor
    screenshot(page, "floor_configs")
    page.locator("a.config-link", has_text="oracle").first.click()
    page.wait_for_url(re.compile(r"/configs/"))
    success = page.inner_text("#conf-success")
    assert "100.0%" in success and "do-nothing floor 38.0% (19/50)" in success
    assert "do-nothing floor 38.0% (19/50)" in page.inner_text("#conf-scored-success")
    screenshot(page, "floor_config")
    assert page.errors == [] and page.dialogs == []


def test_qita_export_carries_the_floor(airline_runs: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-m", "qitos.cli.qita", "export", "--benchmark", "tau-bench", "--logdir",
                           "runs", "--html", "tau.html"], cwd=airline_runs, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    html = (airline_runs / "tau.html").read_text(encoding="utf-8")
    assert html.count('do-nothing floor 38.0% <span class="floor-count">(19/50)</span>') == 2  # both configurations

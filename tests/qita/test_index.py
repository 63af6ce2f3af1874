"""The SQLite index: built from manifests only, kept outside the logdir, updated incrementally."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from qitos.qita.config import BoardConfig
from qitos.qita.index import RunIndex
from qitos.qita.query import RunFilter, RunQueries

from .corpus import act, final, run_engine, tree_digest


def make_index(logdir: Path, cache: Path, results=()) -> RunIndex:
    config = BoardConfig(logdir=logdir, results=list(results), cache_dir=cache)
    return RunIndex(config.logdir, config.index_path(), config.results, refresh_seconds=0)


def test_index_lists_every_run_with_effective_status_and_problems(corpus, tmp_path):
    before = tree_digest(corpus.logdir)
    index = make_index(corpus.logdir, tmp_path, corpus.results)
    stats = index.refresh(force=True)
    assert stats.parsed == index.count() == len([p for p in corpus.logdir.iterdir() if p.name != "not-a-run"])
    assert not index.db_path.is_relative_to(corpus.logdir)
    rows = {r["name"]: dict(r) for r in index.query("SELECT * FROM runs")}
    assert "not-a-run" not in rows
    assert rows[corpus.runs["live"]]["status"] == "running"  # its writer (this process) is alive
    assert rows[corpus.runs["interrupted"]]["status"] == "interrupted"
    assert "corrupt manifest.json" in rows[corpus.runs["corrupt"]]["problem"]
    assert "exploded" in rows[corpus.runs["invalid"]]["problem"]
    assert rows[corpus.runs["budget"]]["stop_reason"] == "budget_steps"
    assert rows[corpus.runs["long"]]["steps"] == 60
    # success comes from the results files, joined on the trace directory name
    solved = {r["task_id"]: r["success"] for r in rows.values() if r["benchmark"] == "jsonl"}
    assert set(solved) == {f"t{i}" for i in range(6)} and all(v is not None for v in solved.values())
    assert tree_digest(corpus.logdir) == before
    index.close()


def test_index_is_incremental_and_follows_live_runs(tmp_path):
    logdir = tmp_path / "runs"
    first = run_engine(logdir, "one", [final("1")])
    index = make_index(logdir, tmp_path / "cache")
    assert index.refresh(force=True).parsed == 1
    assert index.refresh().parsed == 0  # nothing changed: nothing re-read
    second = run_engine(logdir, "two", [act("a"), final("2")])
    stats = index.refresh()
    assert stats.parsed == 1 and index.count() == 2  # only the new directory was read
    # a run being written: status running while its writer lives, re-read on every refresh
    manifest = json.loads((second / "manifest.json").read_text())
    manifest.update(status="running", step_count=1, writer={"pid": os.getpid(), "host": os.uname().nodename})
    (second / "manifest.json").write_text(json.dumps(manifest))
    index.refresh(force=True)
    assert index.get(second.name)["status"] == "running" and index.get(second.name)["live"] == 1
    manifest.update(status="completed", step_count=2)
    (second / "manifest.json").write_text(json.dumps(manifest))
    os.utime(second / "manifest.json", ns=(time.time_ns(), time.time_ns() + 10**9))
    index.refresh()
    row = index.get(second.name)
    assert row["status"] == "completed" and row["steps"] == 2 and row["live"] == 0
    shutil.rmtree(first)
    index.refresh()
    assert index.count() == 1
    index.close()
    # reopening reuses the stored rows: nothing to re-read
    again = make_index(logdir, tmp_path / "cache")
    assert again.refresh(force=True).parsed == 0 and again.count() == 1
    again.close()


def test_filters_sorting_pagination_and_totals(corpus, tmp_path):
    index = make_index(corpus.logdir, tmp_path, corpus.results)
    index.refresh(force=True)
    q = RunQueries(index)
    everything = q.page(RunFilter.from_params({}))
    assert everything.totals["runs"] == index.count()
    jsonl = q.page(RunFilter.from_params({"benchmark": "jsonl"}))
    assert jsonl.totals["runs"] == 12 and jsonl.totals["scored"] == 12 and jsonl.totals["successes"] == 9
    failed = q.page(RunFilter.from_params({"benchmark": "jsonl", "success": "no"}))
    assert {r["task_id"] for r in failed.rows} == {"t1", "t3", "t5"}
    assert q.page(RunFilter.from_params({"status": "interrupted"})).totals["runs"] == 1
    assert q.page(RunFilter.from_params({"stop_reason": "budget_steps"})).rows[0]["task_id"] == "budget-task"
    assert q.page(RunFilter.from_params({"q": "XSS-TASK"})).totals["runs"] == 1  # free text, case-insensitive
    assert q.page(RunFilter.from_params({"q": "100%_"})).totals["runs"] == 0  # LIKE wildcards are escaped
    # the corpus's runners take gold through the oracle channel: none of their runs is official
    assert q.page(RunFilter.from_params({"official": "yes", "benchmark": "jsonl"})).totals["runs"] == 0
    assert q.page(RunFilter.from_params({"official": "no", "benchmark": "jsonl"})).totals["runs"] == 12
    by_steps = q.page(RunFilter.from_params({"sort": "steps", "order": "desc", "per_page": "3"}))
    assert [r["steps"] for r in by_steps.rows][0] == 60 and len(by_steps.rows) == 3
    pages = [q.page(RunFilter.from_params({"sort": "run", "order": "asc", "per_page": "5", "page": str(n)}))
             for n in range(1, 6)]
    names = [r["name"] for p in pages for r in p.rows]
    assert names == sorted(names) and len(set(names)) == index.count() and pages[0].pages == 5
    bad = RunFilter.from_params({"sort": "name; DROP TABLE runs", "page": "-3", "per_page": "zillion"})
    assert bad.sort == "created" and bad.page == 1 and bad.per_page == 50 and bad.errors
    assert q.page(bad).totals["runs"] == index.count()
    index.close()

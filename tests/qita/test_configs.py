"""Configurations, plot figures and spec trees, without a browser.

Results files are written in the real row format; traces no results file names come from the
real engine. Metrics must equal what `qitos.benchmark.metrics.summarize` says of the same rows.
"""

from __future__ import annotations

import json
from pathlib import Path

from qitos.benchmark.metrics import dedupe, summarize
from qitos.qita.board import Board
from qitos.qita.config import BoardConfig, discover_results
from qitos.qita.plots import benchmark_figures, pareto_frontier, pick
from qitos.qita.spectree import build_tree, changed_leaves, reproducibility, side_names

from .corpus import act, final, run_engine


def row(task, trial, success, ref, **extra):
    return {"task_id": task, "benchmark": "gaia", "split": "validation", "subset": None, "trial": trial,
            "model": extra.pop("model", "m1"), "success": success, "score": None if success is None else float(success), "stop_reason": "final",
            "steps": 3, "latency_seconds": 1.5, "token_usage": {"total_tokens": 100}, "cost": 0.01,
            "run_spec_ref": ref, "metadata": {"level": extra.pop("level", 1)}, **extra}


def write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def board_for(tmp_path: Path) -> tuple[Board, Path]:
    logdir = tmp_path / "runs"
    run_engine(logdir, "loose-task", [act("x"), final("y")])  # a trace no results file names
    rows = [row(f"t{i}", t, (i + t) % 2 == 0, "aaaa", recipe="react", level=1 + i % 2) for i in range(4) for t in range(2)]
    rows += [row("t0", 0, True, "bbbb", model="m2", recipe="react"), row("t1", 0, None, "bbbb", model="m2", recipe="react")]
    write(tmp_path / "results" / "mixed.jsonl", rows)
    write(tmp_path / "results" / "oracle.jsonl", [row(f"t{i}", 0, True, "cccc", model=None, recipe="oracle")
                                                  for i in range(4)])
    config = BoardConfig(logdir=logdir, results=discover_results(logdir), cache_dir=tmp_path / "cache")
    board = Board(config)
    board.refresh(force=True)
    return board, tmp_path / "results" / "mixed.jsonl"


def test_configurations_split_a_results_file_by_fingerprint(tmp_path):
    board, mixed = board_for(tmp_path)
    try:
        confs = board.configs.all()
        by_ref = {c.run_spec_ref: c for c in confs if c.source is not None}
        assert set(by_ref) == {"aaaa", "bbbb", "cccc"} and len(confs) == 4
        a = by_ref["aaaa"]
        rows = [r for r in dedupe(json.loads(line) for line in mixed.read_text().splitlines())
                if r["run_spec_ref"] == "aaaa"]
        assert a.metrics == summarize(rows)  # the same numbers as `qit bench eval`
        assert (a.tasks, a.trials) == (4, 2) and a.pass_k[0] == 2
        assert by_ref["bbbb"].coverage == 0.5 or "coverage" in by_ref["bbbb"].metrics  # 1 of 2 rows scored
        assert by_ref["cccc"].is_oracle and not a.is_oracle
        [loose] = [c for c in confs if c.source is None]
        assert loose.metrics["total"] == 1 and loose.run_spec_ref  # keyed by its manifest's fingerprint
        assert len({c.name for c in confs if c.benchmark == "gaia"}) == 3  # names told apart
        # a results file that changes is picked up
        write(mixed, [row("t9", 0, True, "dddd", recipe="react")])
        board.refresh(force=True)
        assert {c.run_spec_ref for c in board.configs.all() if c.source == mixed} == {"dddd"}
    finally:
        board.index.close()


def test_figures_of_a_benchmark(tmp_path):
    board, _ = board_for(tmp_path)
    try:
        confs = board.configs.benchmarks()["gaia"]
        shown = pick(confs, [])
        assert len(shown) == 2 and not any(c.is_oracle for c in shown)  # oracles are not the default picks
        figs = {f["id"]: f["figure"] for f in benchmark_figures(confs, shown)}
        assert set(figs) == {"cost", "tokens", "bars", "levels", "steps", "latency", "tokens-dist", "passk"}
        cost = figs["cost"]
        names = [t["name"] for t in cost["data"]]
        assert "Pareto frontier" in names and "oracle (reads gold)" in names
        oracle_id = next(c.id for c in confs if c.is_oracle)
        assert oracle_id not in cost["frontier"]
        bars = figs["bars"]["data"][0]
        assert len(bars["x"]) == 3 and all(lo >= 0 for lo in bars["error_x"]["arrayminus"])
        assert figs["levels"]["data"][0]["x"] == ["1", "2"]
        assert len(figs["passk"]["data"]) == 1  # only the configuration with two trials
        json.dumps(figs)  # plain JSON for the page
    finally:
        board.index.close()


def test_pareto_frontier():
    points = [(1.0, 0.5, "a"), (2.0, 0.4, "b"), (2.0, 0.7, "c"), (3.0, 0.7, "d"), (0.5, 0.1, "e")]
    assert [p[2] for p in pareto_frontier(points)] == ["e", "a", "c"]


def test_spec_tree_marks_changes_and_folds_tools():
    a = {"model_name": "m1", "generation": {"temperature": 0.0}, "fingerprint": "x",
         "tool_manifest": [{"name": "read", "description": "r"}, {"name": "write", "description": "w"}],
         "metadata": {"recipe": "react"}, "seed": 0}
    b = {"model_name": "m2", "generation": {"temperature": 0.7}, "fingerprint": "y",
         "tool_manifest": [{"name": "write", "description": "w"}, {"name": "read", "description": "r"}],
         "metadata": {"recipe": "react"}, "seed": 0}
    tree = build_tree(a, b, compare=True)
    assert [n.key for n in tree] == ["model_name", "generation", "tool_manifest", "metadata", "seed"]  # no fingerprint
    tools = next(n for n in tree if n.key == "tool_manifest")
    assert tools.folded and tools.changed == 0  # reordered tools are not a change
    assert {n.path for n in changed_leaves(tree)} == {"model_name", "generation.temperature"}
    name_a, name_b, diff = side_names(a, b)
    assert name_a == "model_name=m1, generation.temperature=0.0" and name_b.startswith("model_name=m2")
    rows = {r["field"]: r for r in reproducibility({"run_spec": a, "seed": 0}, {"run_spec": b, "seed": 0})}
    assert rows["seed"]["equal"] and not rows["model"]["equal"] and rows["recipe"]["equal"]


def test_discover_results_beside_or_inside_the_logdir(tmp_path):
    (tmp_path / "runs").mkdir()
    assert discover_results(tmp_path / "runs") == []
    write(tmp_path / "results" / "b.jsonl", [])
    write(tmp_path / "results" / "a.jsonl", [])
    assert [p.name for p in discover_results(tmp_path / "runs")] == ["a.jsonl", "b.jsonl"]


def test_trace_text_in_plot_labels_is_plain(tmp_path):
    logdir = tmp_path / "runs"
    logdir.mkdir()
    evil = "<img src=x onerror=alert(1)>%{x}"
    write(tmp_path / "results" / "evil.jsonl", [row("t0", 0, True, "eeee", model=evil, recipe="react", level=evil)])
    board = Board(BoardConfig(logdir=logdir, results=discover_results(logdir), cache_dir=tmp_path / "cache"))
    try:
        board.refresh(force=True)
        confs = board.configs.all()
        text = json.dumps(benchmark_figures(confs, confs), ensure_ascii=False)
        assert "<img" not in text and "alert(1)>%{x}" not in text  # neither a tag nor a template field
        assert "‹img src=x onerror=alert(1)›%\u200b{x}" in text
    finally:
        board.index.close()


def test_a_trace_that_read_gold_marks_its_configuration_an_oracle():
    from qitos.qita.configs import Configuration, _finish
    from qitos.qita.index import row_from_manifest

    manifest = {"status": "completed", "created_at": "2026-01-01T00:00:00Z", "run_spec": {"metadata": {"recipe": "x"}},
                "official_checks": [{"check": "agent_unaided", "passed": False, "detail": "oracle gold used"}]}
    indexed = row_from_manifest("r1", 0, manifest)
    assert indexed["unaided"] == 0 and row_from_manifest("r2", 0, {**manifest, "official_checks": []})["unaided"] is None
    conf = _finish(Configuration("id", None, "b", None, None, None, rows=[row("t0", 0, True, "r")], run_names=["r1"]),
                   {"r1": {**indexed, "official": 0}})
    assert conf.is_oracle and conf.recipe == "x"

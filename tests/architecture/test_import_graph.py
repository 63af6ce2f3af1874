"""The layout issue's ratchet (issue 35): no new circle, no new upward import, no new file over 450 lines.

What exists today is listed below and may only shrink; the layout work empties the lists, after which this test
requires none at all. `python -m tests.architecture.import_graph` prints the whole report.
"""

from __future__ import annotations

from tests.architecture.import_graph import build

LIMIT = 450

# Circles today, by their modules: a circle may lose members or vanish, never gain one or appear.
# Circles today, by their modules: a circle may lose members or vanish, never gain one or appear.
KNOWN_CIRCLES = [
    {"qitos.benchmark.cybench.adapter", "qitos.benchmark.cybench.agent_env", "qitos.recipes.cybench", "qitos.recipes.cybench_agent"},
    {"qitos.qita.export", "qitos.qita.views.configs", "qitos.qita.views.replay", "qitos.qita.views.run"},
    {"qitos.benchmark.cybench.availability", "qitos.benchmark.cybench.data_issues", "qitos.benchmark.cybench.oracle"},
    {"qitos.benchmark.tau_bench.options", "qitos.benchmark.tau_bench.run_options", "qitos.benchmark.tau_bench.scoring"},
    {"qitos.benchmark.osworld.docker_provider", "qitos.benchmark.osworld.vm_pool"},
    {"qitos.cli.errors", "qitos.cli.paths"},
    {"qitos.results.export", "qitos.results.formats"},
    {"qitos.run.cluster.driver", "qitos.run.executors"},
]

KNOWN_UPWARD = {
    ("qitos.benchmark.cybench.adapter", "qitos.recipes.cybench"),
    ("qitos.benchmark.cybench.adapter", "qitos.recipes.cybench_agent"),
    ("qitos.benchmark.data", "qitos.benchmark.tau_bench.fetch"),
    ("qitos.benchmark.desktop.adapter", "qitos.recipes.computer_use"),
    ("qitos.benchmark.gaia.adapter", "qitos.recipes.gaia"),
    ("qitos.benchmark.jsonl.adapter", "qitos.recipes.qa"),
    ("qitos.benchmark.osworld.adapter", "qitos.recipes.osworld"),
    ("qitos.benchmark.osworld.adapter", "qitos.recipes.osworld_prompt_agent"),
    ("qitos.benchmark.scorers", "qitos.benchmark.gaia.scorer"),
    ("qitos.benchmark.tau_bench.adapter", "qitos.recipes.tau_bench"),
    ("qitos.models.registry", "qitos.run.model_server"),
    ("qitos.results.export", "qitos.benchmark.gaia.metrics"),
    ("qitos.results.export", "qitos.benchmark.tau_bench.interop"),
    ("qitos.results.export", "qitos.qita.export"),
    ("qitos.results.rescore", "qitos.benchmark.cybench.adapter"),
    ("qitos.results.rescore", "qitos.benchmark.cybench.scoring"),
    ("qitos.trace.writer", "qitos.core.stop"),
}

KNOWN_LARGE = {"qitos.benchmark.cybench.adapter": 626, "qitos.sandbox.bwrap": 502, "qitos.cli.bench_view": 481, "qitos.run.job": 470}


def test_no_new_circle() -> None:
    for circle in build().circles():
        assert any(set(circle) <= known for known in KNOWN_CIRCLES), f"a new import circle: {' <-> '.join(circle)}"


def test_no_new_upward_import() -> None:
    new = [f"{a} -> {b}" for a, b in build().upward() if (a, b) not in KNOWN_UPWARD]
    assert not new, f"imports from a lower layer up to a higher one: {new}"


def test_no_new_file_over_the_limit() -> None:
    grown = {name: n for name, n in build().largest(LIMIT) if n > KNOWN_LARGE.get(name, LIMIT)}
    assert not grown, f"modules over {LIMIT} lines (split them by concept): {grown}"


def test_the_graph_sees_lazy_imports_and_skips_type_checking_ones(tmp_path) -> None:
    package = tmp_path / "qitos"
    (package / "a").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a" / "__init__.py").write_text("")
    (package / "a" / "x.py").write_text("def f():\n    from . import y\n")
    (package / "a" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from qitos.a import z\n"
                                        "from qitos.a.x import f\n")
    (package / "a" / "z.py").write_text("import qitos.a.y\n")
    graph = build(package)
    assert graph.edges["qitos.a.x"] == {"qitos.a.y"} and graph.edges["qitos.a.y"] == {"qitos.a.x"}
    assert graph.circles() == [["qitos.a.x", "qitos.a.y"]]

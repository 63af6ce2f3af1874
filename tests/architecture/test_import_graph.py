"""The layout's rules (issue 35): no import circle between modules, no import from a lower layer up to a higher one,
no module over 450 lines. `python -m tests.architecture.import_graph` prints the whole report (modules per folder,
circles, upward imports, files over 400 lines); the layers are listed in `import_graph.LAYERS`.
"""

from __future__ import annotations

from tests.architecture.import_graph import build, layer_of

LIMIT = 450


def test_no_import_circle() -> None:
    circles = build().circles()
    assert not circles, "modules that import each other (move the shared part down into one of them or a third): " + \
        "; ".join(" <-> ".join(c) for c in circles)


def test_no_upward_import() -> None:
    upward = [f"{a} -> {b}" for a, b in build().upward()]
    assert not upward, f"imports from a lower layer up to a higher one (name it through the registry instead): {upward}"


def test_no_module_over_the_limit() -> None:
    large = dict(build().largest(LIMIT))
    assert not large, f"modules over {LIMIT} lines (split them by concept): {large}"


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in build().lines if m != "qitos" and layer_of(m) is None]
    assert not unplaced, f"modules outside every layer of import_graph.LAYERS: {unplaced}"


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

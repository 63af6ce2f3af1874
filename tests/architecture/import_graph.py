"""QitOS's own import graph, read from the source (nothing is imported): which module imports which, the circles
among them, the imports that point from a lower layer up to a higher one, and the largest files.

Every import counts, also one inside a function (a lazy import is still a dependency); only imports under
`if TYPE_CHECKING:` are left out. `python -m tests.architecture.import_graph` prints the report.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "qitos"

# Layers, lowest first: a module may import its own layer and the ones below, never one above. The model clients,
# traces and RunSpecs are the kernel's foundations (the Engine records its trace and RunSpec); the run machinery
# runs benchmarks through the adapter protocol, and the families plug into both.
FAMILIES = ("cybench", "desktop", "gaia", "jsonl", "osworld", "tau_bench")
LAYERS: list[tuple[str, ...]] = [
    ("qitos.models", "qitos.trace", "qitos.spec"),
    ("qitos.core",),
    ("qitos.sandbox",),
    ("qitos.benchmark",),
    ("qitos.run", "qitos.results"),
    tuple(f"qitos.benchmark.{family}" for family in FAMILIES),
    ("qitos.recipes",),
    ("qitos.cli", "qitos.qita"),
]


@dataclass(frozen=True)
class Graph:
    edges: dict[str, set[str]]
    lines: dict[str, int]
    files: dict[str, Path]

    def circles(self) -> list[list[str]]:
        """Groups of modules that import each other (strongly connected, two or more), largest first."""
        return sorted((sorted(c) for c in _components(self.edges) if len(c) > 1), key=lambda c: (-len(c), c))

    def upward(self) -> list[tuple[str, str]]:
        """(importer, imported) pairs where the importer's layer is below the imported one's."""
        out = []
        for source, targets in self.edges.items():
            for target in targets:
                low, high = layer_of(source), layer_of(target)
                if low is not None and high is not None and low < high:
                    out.append((source, target))
        return sorted(out)

    def largest(self, over: int) -> list[tuple[str, int]]:
        return sorted(((m, n) for m, n in self.lines.items() if n > over), key=lambda x: -x[1])


def layer_of(module: str) -> int | None:
    """The highest layer whose prefix names the module (a family's modules sit above the protocol's)."""
    found = None
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            found = index
    return found  # None: `qitos` itself, whose public API re-exports every layer


@functools.lru_cache(maxsize=4)
def build(package: Path = PACKAGE) -> Graph:
    files = {_module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    edges: dict[str, set[str]] = {}
    lines: dict[str, int] = {}
    for name, path in files.items():
        text = path.read_text(encoding="utf-8")
        lines[name] = text.count("\n")
        is_package = path.name == "__init__.py"
        edges[name] = {t for t in (_resolve(i, name, is_package, files) for i in _imports(ast.parse(text))) if t
                       and t != name}
    return Graph(edges, lines, files)


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module) -> Iterator[tuple[int, str, list[str]]]:
    """(relative level, module, imported names) of every import outside `if TYPE_CHECKING:`."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or "", [a.name for a in node.names]


def _resolve(found: tuple[int, str, list[str]], importer: str, is_package: bool, files: dict[str, Path]) -> str | None:
    level, module, names = found
    if level:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (level - 1)]
        module = ".".join([*base, module] if module else base)
    if not module.startswith("qitos"):
        return None
    for name in names:  # `from qitos.x import y` where y is a module: the edge goes to y
        if f"{module}.{name}" in files:
            return f"{module}.{name}"
    while module and module not in files:
        module = module.rpartition(".")[0]
    return module or None


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> None:
    graph = build()
    folders: dict[str, int] = {}
    for name, path in graph.files.items():
        folder = ".".join(path.relative_to(PACKAGE.parent).parent.parts)
        folders[folder] = folders.get(folder, 0) + 1
    print(f"{len(graph.lines)} modules; per folder:")
    for folder, count in sorted(folders.items()):
        print(f"  {folder}: {count}")
    circles = graph.circles()
    print(f"{len(circles)} circles:")
    for circle in circles:
        print("  " + " <-> ".join(circle))
    upward = graph.upward()
    print(f"{len(upward)} upward imports:")
    for source, target in upward:
        print(f"  {source} -> {target}")
    print("files over 400 lines:")
    for name, count in graph.largest(400):
        print(f"  {name}: {count}")


if __name__ == "__main__":
    main()

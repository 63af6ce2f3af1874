"""Scoring side: finding constructs in upstream's unmodified Python sources, read as data with `ast`.

Tau-Bench's, CyBench's and OSWorld's readers take their prompt texts from upstream's files this way (never
importing or running them). Each family passes its own error types, so a file that is missing or not shaped as at
the pinned commit is one clear error naming the file and construct.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceReader:
    """`ast` lookups whose failures raise `error` (or `missing` for an absent file, with `hint` to fix it)."""

    error: type[Exception]
    missing: type[Exception]
    hint: str

    def parse(self, root: Path, relative: Path) -> ast.Module:
        path = root / relative
        try:
            return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except OSError:
            raise self.missing(f"{path} not found; {self.hint}") from None
        except SyntaxError as exc:
            raise self.error(f"{path} line {exc.lineno}: not parsable Python ({exc.msg})") from None

    def assigned(self, module: ast.Module, name: str, where: Path) -> ast.expr:
        """The value of the module-level assignment to `name`."""
        for node in module.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return node.value
        raise self.error(f"{where}: no module-level {name}")

    def function(self, module: ast.Module, name: str, where: Path) -> ast.FunctionDef:
        for node in module.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
        raise self.error(f"{where}: no function {name}")

    def method(self, module: ast.Module, cls: str, name: str, where: Path) -> ast.FunctionDef:
        for node in module.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == name:
                        return item
        raise self.error(f"{where}: no method {cls}.{name}")

    def local(self, fn: ast.FunctionDef, name: str, where: Path) -> ast.expr:
        """The value of the assignment to `name` (a local, or an attribute such as ``self.attr``) in `fn`."""
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and target_name(node.targets[0]) == name:
                return node.value
        raise self.error(f"{where}: {fn.name}() does not assign {name}")

    def returned(self, fn: ast.FunctionDef, where: Path) -> ast.expr:
        returns = [n for n in fn.body if isinstance(n, ast.Return) and n.value is not None]
        if len(returns) != 1:
            raise self.error(f"{where}: {fn.name}() should end with one return")
        return returns[0].value  # type: ignore[return-value]


def target_name(node: ast.expr) -> str | None:
    """`x` or `self.attr` (as written) for a plain assignment target; None for anything else."""
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else None

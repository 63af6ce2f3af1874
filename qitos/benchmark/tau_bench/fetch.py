"""Scoring side (data, never in a run): ``qit data fetch tau-bench``: turn an extracted upstream repository into our data layout.

Upstream (sierra-research/tau-bench) keeps its tasks, rules and tool schemas as Python modules.
We read them with :mod:`ast` and evaluate only literals (``ast.literal_eval``); no upstream code
is ever imported or run. Per domain (``tau_bench/envs/<domain>/``) this writes:

* ``db/<collection>.json`` and ``wiki.md``: byte copies of ``data/*.json`` and ``wiki.md``;
* ``rules.json``: the module-level rule list of ``rules.py``;
* ``tools.json``: each tool class's ``get_info()`` return literal, in ``ALL_TOOLS`` order;
* ``tasks_<split>.json``: the ``Task(...)`` list of ``tasks_<split>.py`` as
  ``{user_id, instruction, actions: [{name, kwargs}], outputs}`` (``annotator`` dropped).

JSON files are ``json.dumps(value, indent=2)`` plus a newline, as in the data README. Everything
is parsed and checked before anything is written, and each file is replaced atomically.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

from qitos.benchmark.tau_bench.data import DOMAIN_COLLECTIONS, DOMAIN_SPLITS, RESPOND_ACTION
from qitos.benchmark.tau_bench.errors import TauDataError
from qitos.benchmark.tau_bench.tools import domain_tools

ENVS = Path("tau_bench") / "envs"


class UpstreamFormatError(TauDataError):
    """The upstream tree does not look like the pinned tau-bench commit (file and line named)."""


def convert_upstream(repo_root: Path, target: Path) -> None:
    """Write the retail and airline data of the upstream tree `repo_root` under `target`."""
    root = _repo_dir(Path(repo_root))
    files: dict[Path, bytes] = {}
    for domain in DOMAIN_SPLITS:
        files.update({Path(domain) / name: data for name, data in _domain_files(root / ENVS / domain, domain).items()})
    licence = root / "LICENSE"
    if licence.is_file():
        files[Path("LICENSE")] = licence.read_bytes()
    for relative, data in files.items():
        _write_atomic(Path(target) / relative, data)


def _repo_dir(repo_root: Path) -> Path:
    """The repository root; a single wrapping folder (as in a GitHub tarball) is looked through."""
    if (repo_root / ENVS).is_dir():
        return repo_root
    children = [child for child in repo_root.iterdir() if child.is_dir()] if repo_root.is_dir() else []
    if len(children) == 1 and (children[0] / ENVS).is_dir():
        return children[0]
    raise UpstreamFormatError(f"{repo_root}: no {ENVS}/ folder; give the extracted sierra-research/tau-bench tree")


def _domain_files(src: Path, domain: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in DOMAIN_COLLECTIONS[domain]:
        path = src / "data" / f"{name}.json"
        data = _read_bytes(path)
        try:
            if not isinstance(json.loads(data), dict):
                raise UpstreamFormatError(f"{path}: expected a JSON object of records")
        except ValueError as exc:
            raise UpstreamFormatError(f"{path}: not valid JSON ({exc})") from None
        files[f"db/{name}.json"] = data
    files["wiki.md"] = _read_bytes(src / "wiki.md")
    files["rules.json"] = _dump(parse_rules(src / "rules.py"))
    tools = parse_tools(src / "tools")
    _check_tools(src / "tools", domain, tools)
    files["tools.json"] = _dump(tools)
    names = {tool["function"]["name"] for tool in tools}
    for split in DOMAIN_SPLITS[domain]:
        path = src / f"tasks_{split}.py"
        tasks = parse_tasks(path, split)
        for index, task in enumerate(tasks):
            unknown = [a["name"] for a in task["actions"] if a["name"] not in names and a["name"] != RESPOND_ACTION]
            if unknown:
                raise UpstreamFormatError(f"{path}: task {index} calls unknown tool(s) {unknown}")
        files[f"tasks_{split}.json"] = _dump(tasks)
    return files


# --- the three kinds of module ---------------------------------------------------------------
def parse_rules(path: Path) -> list[str]:
    """The module-level list assigned to ``RULES`` (or ``rules``) in ``rules.py``."""
    value = _literal(path, _assigned(path, _module(path), ("RULES", "rules")))
    if not isinstance(value, list) or not all(isinstance(rule, str) for rule in value):
        raise UpstreamFormatError(f"{path}: the rules should be a list of strings")
    return value


def parse_tools(folder: Path) -> list[dict[str, Any]]:
    """``get_info()`` of each class in ``ALL_TOOLS`` of ``tools/__init__.py``, in that order."""
    init = folder / "__init__.py"
    module = _module(init)
    sources: dict[str, tuple[str, str]] = {}  # local name -> (module file stem, class name)
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                sources[alias.asname or alias.name] = (node.module, alias.name)
    listing = _assigned(init, module, ("ALL_TOOLS",))
    if not isinstance(listing, ast.List) or not all(isinstance(item, ast.Name) for item in listing.elts):
        raise UpstreamFormatError(f"{init} line {listing.lineno}: ALL_TOOLS should be a list of class names")
    tools = []
    for item in listing.elts:
        name = item.id  # type: ignore[attr-defined]
        if name not in sources:
            raise UpstreamFormatError(f"{init}: {name} is not imported from a module of this folder")
        stem, class_name = sources[name]
        tools.append(_tool_info(folder / f"{stem.replace('.', '/')}.py", class_name))
    return tools


def parse_tasks(path: Path, split: str) -> list[dict[str, Any]]:
    """The list of ``Task(...)`` calls assigned to ``TASKS_<SPLIT>`` (or ``TASKS``)."""
    listing = _assigned(path, _module(path), (f"TASKS_{split.upper()}", "TASKS"))
    if not isinstance(listing, ast.List):
        raise UpstreamFormatError(f"{path} line {listing.lineno}: the tasks should be a list of Task(...)")
    tasks = []
    for node in listing.elts:
        fields = _call_keywords(path, node, "Task")
        missing = [key for key in ("user_id", "instruction", "actions") if key not in fields]
        if missing:
            raise UpstreamFormatError(f"{path} line {node.lineno}: Task(...) lacks {', '.join(missing)}")
        if not isinstance(fields["actions"], ast.List):
            raise UpstreamFormatError(f"{path} line {node.lineno}: actions should be a list of Action(...)")
        actions = []
        for action in fields["actions"].elts:
            parts = _call_keywords(path, action, "Action")
            if "name" not in parts:
                raise UpstreamFormatError(f"{path} line {action.lineno}: Action(...) lacks name")
            kwargs = _literal(path, parts["kwargs"]) if "kwargs" in parts else {}
            actions.append({"name": _literal(path, parts["name"]), "kwargs": kwargs})
        outputs = _literal(path, fields["outputs"]) if "outputs" in fields else []
        user_id, instruction = _literal(path, fields["user_id"]), _literal(path, fields["instruction"])
        tasks.append({"user_id": user_id, "instruction": instruction, "actions": actions, "outputs": outputs})
    return tasks


# --- helpers ---------------------------------------------------------------------------------
def _tool_info(path: Path, class_name: str) -> dict[str, Any]:
    module = _module(path)
    cls = next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        raise UpstreamFormatError(f"{path}: no class {class_name}")
    method = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "get_info"), None)
    returned = next((n for n in method.body if isinstance(n, ast.Return)), None) if method else None
    if returned is None or returned.value is None:
        raise UpstreamFormatError(f"{path}: {class_name}.get_info() should return a dict literal")
    info = _literal(path, returned.value)
    if not (isinstance(info, dict) and isinstance(info.get("function"), dict) and "name" in info["function"]):
        raise UpstreamFormatError(f"{path}: {class_name}.get_info() is not a function schema")
    return info


def _check_tools(folder: Path, domain: str, tools: list[dict[str, Any]]) -> None:
    """The schemas must describe exactly the tools QitOS implements for the domain."""
    names = [tool["function"]["name"] for tool in tools]
    ours = list(domain_tools(domain))
    if sorted(names) != sorted(ours):
        missing, extra = sorted(set(ours) - set(names)), sorted(set(names) - set(ours))
        raise UpstreamFormatError(f"{folder}: upstream tools differ from QitOS's {domain} tools "
                                  f"(missing {missing}, unexpected {extra}); is this the pinned commit?")  # fmt: skip


def _module(path: Path) -> ast.Module:
    try:
        return ast.parse(_read(path), filename=str(path))
    except SyntaxError as exc:
        raise UpstreamFormatError(f"{path} line {exc.lineno}: not parsable Python ({exc.msg})") from None


def _assigned(path: Path, module: ast.Module, names: tuple[str, ...]) -> ast.expr:
    """The value of the first module-level assignment to one of `names` (in order of preference)."""
    found: dict[str, ast.expr] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found.setdefault(node.targets[0].id, node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found.setdefault(node.target.id, node.value)
    for name in names:
        if name in found:
            return found[name]
    raise UpstreamFormatError(f"{path}: no module-level assignment to {' or '.join(names)}")


def _call_keywords(path: Path, node: ast.expr, callee: str) -> dict[str, ast.expr]:
    func = node.func if isinstance(node, ast.Call) else None
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name != callee or node.args:  # type: ignore[union-attr]
        raise UpstreamFormatError(f"{path} line {node.lineno}: expected {callee}(...) with keyword arguments")
    return {kw.arg: kw.value for kw in node.keywords if kw.arg}  # type: ignore[union-attr]


def _literal(path: Path, node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise UpstreamFormatError(f"{path} line {node.lineno}: expected a literal value") from None


def _read(path: Path) -> str:
    return _read_bytes(path).decode("utf-8")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UpstreamFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _dump(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)

"""The upstream converter: reads Python modules with ast only, and writes the README's data layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.tau_bench import clear_cache, load_domain
from qitos.benchmark.tau_bench.data import DOMAIN_COLLECTIONS, DOMAIN_SPLITS
from qitos.benchmark.tau_bench.fetch import UpstreamFormatError, convert_upstream


def class_name(tool: str) -> str:
    return "".join(part.capitalize() for part in tool.split("_"))


class Upstream:
    """Writes an upstream-like tau-bench tree. Every module would create `sentinel` if it were run."""

    def __init__(self, root: Path, sentinel: Path) -> None:
        self.envs = root / "tau_bench" / "envs"
        self.trap = f"import os\nos.makedirs({str(sentinel)!r}, exist_ok=True)\n"

    def module(self, path: Path, body: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Copyright Sierra\n\n{self.trap}\n{body}", encoding="utf-8")

    def domain(self, domain: str, *, db: dict[str, bytes], wiki: str, rules: list[str],
               tools: list[dict[str, Any]], tasks: dict[str, list[dict[str, Any]]]) -> None:
        src = self.envs / domain
        for name, data in db.items():
            (src / "data").mkdir(parents=True, exist_ok=True)
            (src / "data" / f"{name}.json").write_bytes(data)
        (src / "wiki.md").write_text(wiki, encoding="utf-8")
        self.module(src / "rules.py", f"RULES = {rules!r}\n")
        imports, names = [], []
        for index, info in enumerate(tools):
            name = info["function"]["name"]
            cls = class_name(name)
            local = f"{cls}Alias" if index == 0 else cls  # one aliased import
            imports.append(f"from .{name} import {cls}" + (f" as {local}" if local != cls else ""))
            names.append(local)
            act = self.trap.splitlines()[1]
            self.module(src / "tools" / f"{name}.py", (
                f"class {cls}(Tool):\n    @staticmethod\n    def invoke(data, **kwargs):\n        {act}\n\n"
                f"    @staticmethod\n    def get_info():\n        {act}\n        return {info!r}\n"))
        self.module(src / "tools" / "__init__.py", "\n".join(imports) + f"\n\nALL_TOOLS = [{', '.join(names)}]\n")
        for split, items in tasks.items():
            variable = "TASKS" if domain == "airline" else f"TASKS_{split.upper()}"
            body = "".join(
                f"    Task(\n        annotator=\"0\",\n        user_id={t['user_id']!r},\n"
                f"        instruction={t['instruction']!r},\n        actions=["
                + "".join(f"Action(name={a['name']!r}, kwargs={a['kwargs']!r}), " for a in t["actions"])
                + f"],\n        outputs={t['outputs']!r},\n    ),\n"
                for t in items
            )
            source = f"from tau_bench.types import Task, Action\n\n{variable} = [\n{body}]\n"
            self.module(src / f"tasks_{split}.py", source)


def mirror_of(upstream: Upstream, data: Path, limit: int | None = None) -> None:
    """An upstream tree holding the shared data (optionally only the first `limit` tasks of each split)."""
    for domain, splits in DOMAIN_SPLITS.items():
        folder = data / domain
        upstream.domain(
            domain,
            db={name: (folder / "db" / f"{name}.json").read_bytes() for name in DOMAIN_COLLECTIONS[domain]},
            wiki=(folder / "wiki.md").read_text(encoding="utf-8"),
            rules=json.loads((folder / "rules.json").read_text()),
            tools=json.loads((folder / "tools.json").read_text()),
            tasks={s: json.loads((folder / f"tasks_{s}.json").read_text())[:limit] for s in splits},
        )


def test_round_trip_reproduces_the_shared_data_byte_for_byte(tau_data: Path, tmp_path: Path) -> None:
    sentinel = tmp_path / "EXECUTED"
    mirror_of(Upstream(tmp_path / "repo", sentinel), tau_data)
    (tmp_path / "repo" / "LICENSE").write_bytes((tau_data / "LICENSE").read_bytes())
    convert_upstream(tmp_path / "repo", tmp_path / "out")
    assert not sentinel.exists(), "an upstream module was executed"
    produced = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert len(produced) == 1 + 2 * (3 + 3) + 4  # LICENSE; per domain 3 db files, wiki, rules, tools; 4 task files
    for relative in produced:
        assert (tmp_path / "out" / relative).read_bytes() == (tau_data / relative).read_bytes(), relative


def test_small_tree_literals_kept_exactly(tau_data: Path, tmp_path: Path) -> None:
    sentinel = tmp_path / "EXECUTED"
    upstream = Upstream(tmp_path / "tau-bench-59a200c", sentinel)  # a GitHub tarball wraps the tree in one folder
    mirror_of(upstream, tau_data, limit=1)
    tasks = [{"user_id": "u_1", "instruction": "Say \"hi\" and it's fine: café.",
              "actions": [{"name": "book_reservation", "kwargs": {"amount": 250, "price": 250.0, "ok": True,
                                                                   "none": None, "list": [1, 2.5, "x"]}},
                          {"name": "transfer_to_human_agents", "kwargs": {"summary": "s"}}],
              "outputs": ["327", "1000"]}]  # fmt: skip
    tools = json.loads((tau_data / "airline" / "tools.json").read_text())
    upstream.domain("airline", db={n: b'{"k": {"v": 1}}' for n in DOMAIN_COLLECTIONS["airline"]}, wiki="# Policy\n",
                    rules=[], tools=tools, tasks={"test": tasks})
    convert_upstream(tmp_path, tmp_path / "out")
    assert not sentinel.exists()
    out = tmp_path / "out" / "airline"
    text = (out / "tasks_test.json").read_text(encoding="utf-8")
    assert json.loads(text) == tasks and text == json.dumps(tasks, indent=2, ensure_ascii=False) + "\n"
    kwargs = json.loads(text)[0]["actions"][0]["kwargs"]
    assert type(kwargs["amount"]) is int and type(kwargs["price"]) is float
    assert (out / "rules.json").read_text() == "[]\n"
    assert (out / "db" / "users.json").read_bytes() == b'{"k": {"v": 1}}'
    assert json.loads((out / "tools.json").read_text()) == tools
    clear_cache()
    domain = load_domain(tmp_path / "out", "airline")
    assert domain.task("test", 0).actions[0].kwargs["price"] == 250.0 and domain.wiki == "# Policy\n"
    clear_cache()


def write_broken(tau_data: Path, tmp_path: Path, path: str, old: str, new: str) -> Path:
    mirror_of(Upstream(tmp_path / "repo", tmp_path / "EXECUTED"), tau_data, limit=2)
    target = tmp_path / "repo" / "tau_bench" / "envs" / path
    target.write_text(target.read_text().replace(old, new, 1))
    return tmp_path / "repo"


@pytest.mark.parametrize(
    ("path", "old", "new", "message"),
    [("retail/tasks_test.py", "kwargs={", "kwargs=dict(a=open('x')) or {",
      r"tasks_test.py line \d+: expected a literal"),
     ("retail/tasks_dev.py", "TASKS_DEV =", "OTHER =",
      "tasks_dev.py: no module-level assignment to TASKS_DEV or TASKS"),
     ("airline/tools/__init__.py", "ALL_TOOLS = [", "ALL_TOOLS = [Unknown, ", "Unknown is not imported"),
     ("retail/rules.py", "RULES = [", "RULES = [1, ", "the rules should be a list of strings"),
     ("retail/tasks_train.py", "name='", "name='drop_database', x='", "unknown tool")],
)  # fmt: skip
def test_malformed_upstream_is_named_and_nothing_is_written(tau_data: Path, tmp_path: Path, path: str, old: str,
                                                            new: str, message: str) -> None:
    repo = write_broken(tau_data, tmp_path, path, old, new)
    with pytest.raises(UpstreamFormatError, match=message):
        convert_upstream(repo, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "EXECUTED").exists()


def test_not_an_upstream_tree(tmp_path: Path) -> None:
    with pytest.raises(UpstreamFormatError, match="no tau_bench/envs/ folder"):
        convert_upstream(tmp_path, tmp_path / "out")

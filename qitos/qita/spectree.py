"""A RunSpec (or any nested JSON) as a tree the pages render as collapsible sections.

With two specs the tree is their diff: every leaf holds both values, every branch counts the
changed leaves below it, so a page opens the branches that changed and leaves the rest (and
the long `tool_manifest`) folded. Lists of named objects are keyed by name, as in `diff.flatten`,
so reordering tools is not a change. Also: the reproducibility fields two runs must share to be
comparable, and a short name for each side of a comparison made of what differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ABSENT = "(absent)"
FOLDED = frozenset({"tool_manifest"})  # long and rarely the point: folded even when changed
SKIPPED = frozenset({"fingerprint"})  # derived from the rest

# Fields that make two runs comparable, shown side by side whether or not they differ.
REPRODUCIBILITY = (
    ("model", ("model_id",), ("run_spec", "model_name")),
    ("model family", ("model_family",), ("run_spec", "model_family")),
    ("recipe", None, ("run_spec", "metadata", "recipe")),
    ("benchmark", ("benchmark_name",), ("run_spec", "benchmark_name")),
    ("split", ("benchmark_split",), ("run_spec", "benchmark_split")),
    ("subset", None, ("run_spec", "benchmark_subset")),
    ("dataset digest", None, ("run_spec", "dataset_digest")),
    ("prompt protocol", ("prompt_protocol",), ("run_spec", "prompt_protocol")),
    ("parser", ("parser_name",), ("run_spec", "parser_name")),
    ("prompt hash", ("prompt_hash",), None),
    ("tool manifest hash", ("tool_manifest_hash",), None),
    ("generation", None, ("run_spec", "generation")),
    ("reasoning policy", None, ("run_spec", "reasoning_policy")),
    ("model server", None, ("run_spec", "model_server")),
    ("seed", ("seed",), ("run_spec", "seed")),
    ("budget", None, ("run_spec", "budget")),
    ("git SHA", ("git_sha",), ("run_spec", "git_sha")),
    ("package version", ("package_version",), ("run_spec", "package_version")),
    ("python / platform", None, ("run_spec", "environment")),
    ("replay mode", ("replay_mode",), None),
    ("official", ("official_run",), None),
    ("RunSpec fingerprint", None, ("run_spec", "fingerprint")),
)

# What names a side of a comparison, most telling first.
NAMING_ORDER = ("metadata.recipe", "model_name", "model_provider", "base_url_host", "model_server", "generation",
                "reasoning_policy", "prompt_protocol",
                "parser_name", "toolset_name", "budget", "seed", "benchmark_name", "benchmark_split",
                "benchmark_subset", "metadata")


@dataclass
class Node:
    key: str
    path: str
    a: Any = None
    b: Any = None
    children: list["Node"] = field(default_factory=list)
    changed: int = 0  # changed leaves at or below this node
    leaves: int = 1
    folded: bool = False

    @property
    def is_leaf(self) -> bool:
        return not self.children


def _keyed(value: Any) -> Any:
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        return {str(v["name"]): {k: x for k, x in v.items() if k != "name"} for v in value}
    return value


def _branchy(value: Any) -> bool:
    return isinstance(value, dict) and bool(value)


def build_tree(a: Any, b: Any = ABSENT, compare: bool = False, key: str = "", path: str = "") -> list[Node]:
    """Children of one level; `compare` marks leaves whose A and B differ."""
    a, b = _keyed(a), _keyed(b)
    keys: list[str] = []
    for side in (a, b):
        if isinstance(side, dict):
            keys += [k for k in side if k not in keys and k not in SKIPPED]
    out = []
    for k in keys:
        va = a.get(k, ABSENT) if isinstance(a, dict) else ABSENT
        vb = b.get(k, ABSENT) if isinstance(b, dict) else ABSENT
        va, vb = _keyed(va), _keyed(vb)
        sub = f"{path}.{k}" if path else str(k)
        node = Node(str(k), sub, folded=str(k) in FOLDED)
        if _branchy(va) or _branchy(vb):
            node.children = build_tree(va, vb, compare, str(k), sub)
            node.changed = sum(c.changed for c in node.children)
            node.leaves = sum(c.leaves for c in node.children)
            if not node.children:
                node.a, node.b = va, vb
        else:
            node.a, node.b = va, vb
            node.changed = 1 if compare and va != vb else 0
        out.append(node)
    return out


def changed_leaves(nodes: list[Node]) -> list[Node]:
    out = []
    for n in nodes:
        if n.is_leaf and n.changed:
            out.append(n)
        out += changed_leaves(n.children)
    return out


def _get(data: dict[str, Any], path: tuple[str, ...] | None) -> Any:
    if not path:
        return ABSENT
    cur: Any = data
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return ABSENT
        cur = cur[part]
    return cur


def reproducibility(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparability fields of two manifests, side by side, each marked equal or not."""
    rows = []
    for label, top, spec in REPRODUCIBILITY:
        va = _get(a, top) if top else ABSENT
        va = va if va not in (ABSENT, None) else _get(a, spec)
        vb = _get(b, top) if top else ABSENT
        vb = vb if vb not in (ABSENT, None) else _get(b, spec)
        rows.append({"field": label, "a": va, "b": vb, "equal": va == vb})
    return rows


def _rank(path: str) -> int:
    for n, prefix in enumerate(NAMING_ORDER):
        if path == prefix or path.startswith(prefix + "."):
            return n
    return len(NAMING_ORDER)


def side_names(a: dict[str, Any] | None, b: dict[str, Any] | None, limit: int = 3) -> tuple[str, str, list[Node]]:
    """Name A and B by the RunSpec fields that differ (e.g. 'model_name=qwen, temperature=0.7')."""
    if not a or not b:
        return "", "", []
    diff = [n for n in changed_leaves(build_tree(a, b, compare=True))
            if not n.path.startswith(("tool_manifest", "environment", "git_", "package_version"))]
    diff.sort(key=lambda n: (_rank(n.path), n.path))
    shown = diff[:limit]

    def name(side: str) -> str:
        parts = [f"{n.path}={_short(getattr(n, side))}" for n in shown]
        return ", ".join(parts) + (f" (+{len(diff) - limit} more)" if len(diff) > limit else "")
    return name("a"), name("b"), diff


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"

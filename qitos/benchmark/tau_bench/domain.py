"""Both sides: a Tau-Bench domain without its tasks.

What the agent is told: the policy (wiki), the rules and the tool schemas; the scoring side's view adds the
pristine database its episodes act on (the agent side never holds the database: its actions run on the
scoring side). No task instruction, gold action or required output is here: those are in
:class:`.data.DomainData`, which only the scoring side loads. On the agent side the domain is read from
the files the scoring side ships into the agent's work dir (:func:`read_agent_domain`, the files of
:func:`agent_files`); the scoring side hands its cached copy's view (``DomainData.agent_domain()``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qitos.benchmark.tau_bench.errors import TauDataError
from qitos.benchmark.tau_bench.state import PristineDb

DOMAIN_COLLECTIONS: dict[str, tuple[str, ...]] = {
    "retail": ("orders", "products", "users"),
    "airline": ("flights", "reservations", "users"),
}


class AgentDomain:
    """One domain as the agent sees it. Shared, treat as read-only."""

    def __init__(self, name: str, pristine: PristineDb | None, wiki: str, rules: list[str],
                 tools_info: list[dict[str, Any]]) -> None:
        self.name = name
        self.pristine = pristine
        self.wiki = wiki
        self.rules = rules
        self.tools_info = tools_info

    def __repr__(self) -> str:
        return f"AgentDomain({self.name!r})"


def agent_files(domain: str) -> list[str]:
    """The files of a domain folder the agent side needs, relative to it (never the tasks files, nor the database)."""
    if domain not in DOMAIN_COLLECTIONS:
        raise ValueError(f"Unknown tau-bench domain: {domain!r} (expected one of: retail, airline)")
    return ["wiki.md", "rules.json", "tools.json"]


def read_agent_domain(folder: Path, domain: str) -> AgentDomain:
    """The domain from `folder` (a copy of ``<data dir>/tau-bench/<domain>`` holding only :func:`agent_files`)."""
    agent_files(domain)  # a known domain
    wiki_path = folder / "wiki.md"
    if not wiki_path.is_file():
        raise TauDataError(f"tau-bench policy file missing: {wiki_path}")
    return AgentDomain(name=domain, pristine=None, wiki=wiki_path.read_text(encoding="utf-8"),
                       rules=read_json(folder / "rules.json", list), tools_info=read_json(folder / "tools.json", list))


def read_json(path: Path, kind: type) -> Any:
    if not path.is_file():
        raise TauDataError(f"tau-bench data file missing: {path}")
    try:
        with path.open(encoding="utf-8") as handle:
            value = json.load(handle)
    except json.JSONDecodeError as exc:
        raise TauDataError(f"tau-bench data file is not valid JSON: {path}: {exc}") from exc
    if not isinstance(value, kind):
        raise TauDataError(f"tau-bench data file {path} should hold a JSON {kind.__name__}")
    return value

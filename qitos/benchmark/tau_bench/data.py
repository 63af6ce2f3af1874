"""Scoring side: loading a Tau-Bench domain (database, policy, tool schemas, tasks) from a data directory.

The tasks (each user's instruction, the gold actions and outputs) stay here, on the scoring side;
the agent side gets the domain without them (:mod:`.domain`). The data directory is ``<QITOS_DATA_DIR>/tau-bench`` (layout in its README.md). A domain is
parsed once per process and cached per (directory, domain); its database is kept pristine
and episodes work on copy-on-write views of it (:mod:`state`).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qitos.benchmark.gold import Sealed

from qitos.benchmark.tau_bench.domain import DOMAIN_COLLECTIONS, AgentDomain, read_json
from qitos.benchmark.tau_bench.errors import TauDataError
from qitos.benchmark.tau_bench.state import PristineDb
DOMAIN_SPLITS: dict[str, tuple[str, ...]] = {
    "retail": ("test", "train", "dev"),
    "airline": ("test",),
}
TERMINATE_TOOLS: tuple[str, ...] = ("transfer_to_human_agents",)
RESPOND_ACTION = "respond"
STOP_TOKEN = "###STOP###"


class Action(BaseModel):
    """One agent action: a tool call, or ``respond`` with kwargs ``{"content": ...}``."""

    model_config = ConfigDict(frozen=True)

    name: str
    kwargs: dict[str, Any] = Field(default_factory=dict)


class Task(BaseModel):
    """A task of a split: the user's instruction, the gold tool calls, the required outputs."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    instruction: str
    actions: list[Action]
    outputs: list[str] = Field(default_factory=list)

    def user_side(self) -> "UserTask":
        return UserTask(user_id=self.user_id, instruction=self.instruction)


class UserTask(BaseModel):
    """What the episode needs while the agent runs (the simulated user's identity and instruction): no gold."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    instruction: str


class DomainData:
    """Everything read from disk for one domain, its tasks included (scoring side). Shared, treat as read-only."""

    def __init__(
        self,
        name: str,
        root: Path,
        pristine: PristineDb,
        wiki: str,
        rules: list[str],
        tools_info: list[dict[str, Any]],
        tasks: dict[str, list[Task]],
    ) -> None:
        self.name = name
        self.root = root
        self.pristine = pristine
        self.wiki = wiki
        self.rules = rules
        self.tools_info = tools_info
        self._tasks = Sealed(tasks)  # gold actions and outputs: opened by the reward and the adapter only
        # Filled by reward.gold_state(): (split, task_index) -> fingerprints of the gold replay.
        self.gold_cache: dict[tuple[str, int], Any] = {}
        self._agent_view: AgentDomain | None = None

    def agent_domain(self) -> AgentDomain:
        """The domain without its tasks (the same pristine database, policy and schemas): what the agent acts on."""
        if self._agent_view is None:
            self._agent_view = AgentDomain(self.name, self.pristine, self.wiki, self.rules, self.tools_info)
        return self._agent_view

    def split_tasks(self, split: str) -> list[Task]:
        tasks = self._tasks.open()
        try:
            return tasks[split]
        except KeyError:
            raise ValueError(f"Unknown task split: {split} (domain {self.name} has {', '.join(tasks)})") from None

    def task(self, split: str, task_index: int) -> Task:
        tasks = self.split_tasks(split)
        if not isinstance(task_index, int) or isinstance(task_index, bool):
            raise TypeError(f"task_index must be an int, got {type(task_index).__name__}")
        if not 0 <= task_index < len(tasks):
            raise IndexError(
                f"task index {task_index} out of range for {self.name}/{split} "
                f"({len(tasks)} tasks: 0..{len(tasks) - 1})"
            )
        return tasks[task_index]

    def user_task(self, split: str, task_index: int) -> UserTask:
        return self.task(split, task_index).user_side()

    def __repr__(self) -> str:
        counts = ", ".join(f"{split}={len(tasks)}" for split, tasks in self._tasks.open().items())
        return f"DomainData({self.name!r}, {counts}, root={str(self.root)!r})"


_CACHE: dict[tuple[Path, str], DomainData] = {}
_LOCK = threading.Lock()


def load_domain(data_dir: str | Path, domain: str) -> DomainData:
    """The domain `domain` of the tau-bench data directory `data_dir`, parsed once per process."""
    if domain not in DOMAIN_COLLECTIONS:
        raise ValueError(f"Unknown tau-bench domain: {domain!r} (expected one of: retail, airline)")
    root = Path(data_dir).expanduser().resolve()
    key = (root, domain)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is None:
            cached = _CACHE[key] = _read_domain(root, domain)
        return cached


def clear_cache() -> None:
    """Forget every loaded domain (tests and long-lived processes after a data update)."""
    with _LOCK:
        _CACHE.clear()


def _read_domain(root: Path, domain: str) -> DomainData:
    folder = root / domain
    if not folder.is_dir():
        raise TauDataError(
            f"tau-bench domain folder not found: {folder} "
            "(expected the data directory that holds retail/ and airline/, e.g. $QITOS_DATA_DIR/tau-bench)"
        )
    collections = {name: read_json(folder / "db" / f"{name}.json", dict) for name in DOMAIN_COLLECTIONS[domain]}
    tasks = {}
    for split in DOMAIN_SPLITS[domain]:
        raw = read_json(folder / f"tasks_{split}.json", list)
        try:
            tasks[split] = [Task.model_validate(item) for item in raw]
        except ValueError as exc:
            raise TauDataError(f"malformed task in {folder / f'tasks_{split}.json'}: {exc}") from exc
    wiki_path = folder / "wiki.md"
    if not wiki_path.is_file():
        raise TauDataError(f"tau-bench policy file missing: {wiki_path}")
    return DomainData(
        name=domain,
        root=root,
        pristine=PristineDb(collections),
        wiki=wiki_path.read_text(encoding="utf-8"),
        rules=read_json(folder / "rules.json", list),
        tools_info=read_json(folder / "tools.json", list),
        tasks=tasks,
    )


"""Scoring side: the Tau-Bench reward: final database vs. a gold replay from pristine, plus the outputs check.

Same decision as upstream (data hashes compared with upstream's own hash function; each
expected output must be a case-insensitive substring of some ``respond`` content with commas
removed), with one deliberate improvement: the agent's database is left untouched. Upstream
swaps in the gold state and appends the replayed gold calls to the action log; here the gold
replay runs on its own copy-on-write database and its fingerprints are cached per task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from qitos.benchmark.tau_bench.data import RESPOND_ACTION, TERMINATE_TOOLS, Action, DomainData, Task
from qitos.benchmark.tau_bench.errors import OutputsCheckError
from qitos.benchmark.tau_bench.state import TauDb, deep_copy
from qitos.benchmark.tau_bench.tools import call_tool, domain_tools


class RewardResult(BaseModel):
    """Outcome of one episode. ``reward`` is 1.0 or 0.0 (no partial credit)."""

    reward: float
    r_actions: float
    r_outputs: float | None  # None when the task has no required outputs
    outputs: dict[str, bool]  # expected output -> found in some respond
    final_state_digest: str  # canonical digest of the agent's final database
    gold_state_digest: str  # canonical digest of the gold replay
    data_hash: str  # upstream hash of the agent's final database
    gt_data_hash: str  # upstream hash of the gold replay
    gold_actions: list[Action]  # upstream RewardResult.actions: gold calls except respond
    actions_taken: list[Action]  # the agent's action log

    def upstream_info(self) -> dict[str, Any]:
        """The ``info`` upstream reports: outputs detail if the task has outputs, else the hash."""
        if self.r_outputs is not None:
            return {"r_outputs": self.r_outputs, "outputs": dict(self.outputs)}
        return {"r_actions": self.r_actions, "gt_data_hash": self.gt_data_hash}


@dataclass(frozen=True)
class GoldState:
    """Fingerprints of a task's gold replay, plus the gold calls that failed (upstream ignores them)."""

    digest: str
    data_hash: str
    failed_calls: tuple[tuple[int, str, str], ...]  # (gold action index, tool name, observation)


def replay_gold(domain_data: DomainData, task: Task) -> tuple[TauDb, list[tuple[int, str, str]]]:
    """Play the task's gold calls (terminating tools skipped) on a fresh database."""
    db = TauDb(domain_data.pristine)
    tools = domain_tools(domain_data.name)
    failed: list[tuple[int, str, str]] = []
    for index, action in enumerate(task.actions):
        if action.name in TERMINATE_TOOLS or action.name == RESPOND_ACTION:
            continue  # a gold respond only talks to the user; none is shipped anyway
        tool = tools.get(action.name)
        if tool is None:
            failed.append((index, action.name, f"Unknown action {action.name}"))
            continue
        observation = call_tool(domain_data.name, tool, db, deep_copy(action.kwargs))
        if observation.startswith("Error: "):
            failed.append((index, action.name, observation))
    return db, failed


def gold_state(domain_data: DomainData, split: str, task_index: int) -> GoldState:
    """The gold replay's fingerprints for one task, computed once per process."""
    key = (split, task_index)
    cached = domain_data.gold_cache.get(key)
    if cached is None:
        db, failed = replay_gold(domain_data, domain_data.task(split, task_index))
        cached = GoldState(digest=db.digest(), data_hash=db.upstream_hash(), failed_calls=tuple(failed))
        domain_data.gold_cache[key] = cached
    return cached


def said_in(actions: Sequence[Action]) -> list[Any]:
    """The contents of the respond actions of an action log, in order (as sent: not always text)."""
    return [action.kwargs.get("content", "") for action in actions if action.name == RESPOND_ACTION]


def outputs_found(outputs: Sequence[str], said: Sequence[Any]) -> dict[str, bool]:
    """Each expected output -> whether some message said to the user contains it (commas removed, any case).

    As upstream's loop: for each output, the messages in order until one contains it; a message that is not
    text (None, a list) reached on the way raises, as ``.lower()`` raises there (:class:`OutputsCheckError`)."""
    found: dict[str, bool] = {}
    for output in outputs:
        found[output] = False
        for index, text in enumerate(said):
            if not isinstance(text, str):
                raise OutputsCheckError(f"message {index} said to the user is {type(text).__name__}, not text: "
                                        "upstream's outputs check raises on it (reward 0)")
            if output.lower() in text.lower().replace(",", ""):
                found[output] = True
                break
    return found


def compute_reward(
    domain_data: DomainData, split: str, task_index: int, db: TauDb, actions: Sequence[Action],
    said: Sequence[Any] | None = None,
) -> RewardResult:
    """Score the episode whose final database is `db` and whose action log is `actions`.

    `said`: the messages the user was sent (default: the respond actions of `actions`); a split run
    passes the scoring side's own record of them, never the agent side's account."""
    task = domain_data.task(split, task_index)
    gold = gold_state(domain_data, split, task_index)
    data_hash = db.upstream_hash()
    r_actions = 1.0 if data_hash == gold.data_hash else 0.0
    reward = r_actions
    found: dict[str, bool] = {}
    r_outputs: float | None = None
    if task.outputs:
        found = outputs_found(task.outputs, said_in(actions) if said is None else said)
        r_outputs = 1.0 if all(found.values()) else 0.0
        if r_outputs == 0.0:
            reward = 0.0
    return RewardResult(
        reward=reward,
        r_actions=r_actions,
        r_outputs=r_outputs,
        outputs=found,
        final_state_digest=db.digest(),
        gold_state_digest=gold.digest,
        data_hash=data_hash,
        gt_data_hash=gold.data_hash,
        gold_actions=[action for action in task.actions if action.name != RESPOND_ACTION],
        actions_taken=list(actions),
    )

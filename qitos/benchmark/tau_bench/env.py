"""Both sides in one process: a standalone Tau-Bench episode with its user and its reward.

For library use, the conformance fixtures and the speed benchmark (``qit bench`` runs split the two:
the agent side's :mod:`.engine_env` and the scoring side's :mod:`.scoring`). The step semantics are
the scoring side's :class:`.episode.TauEpisode`, upstream's (spec section 3.2); the simulated user
gets the task's instruction; the reward is computed when the episode ends and, unlike upstream,
leaves the agent's database and action log as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from qitos.benchmark.tau_bench.data import STOP_TOKEN, Action, DomainData, UserTask
from qitos.benchmark.tau_bench.episode import TauEpisode
from qitos.benchmark.tau_bench.errors import EnvStateError
from qitos.benchmark.tau_bench.reward import RewardResult, compute_reward
from qitos.benchmark.tau_bench.state import TauDb, deep_copy
from qitos.benchmark.tau_bench.user import UserSimulator


class StepInfo(BaseModel):
    source: str  # "user" for respond/reset, else the action name
    user_cost: float | None = None
    reward_info: RewardResult | None = None


class StepResult(BaseModel):
    observation: str
    done: bool
    reward: float | None = None  # set only on the step that ends the episode
    info: StepInfo


class TauEnv:
    """A Tau-Bench environment bound to one task of one split of a domain."""

    def __init__(self, domain_data: DomainData, task_index: int, split: str = "test", *, user: UserSimulator) -> None:
        self.domain_data = domain_data
        self.split = split
        self.task_index = task_index
        self.task: UserTask = domain_data.user_task(split, task_index)  # validates split and index; no gold
        self.user = user
        self.episode = TauEpisode(domain_data.agent_domain())
        self.reward_result: RewardResult | None = None
        self._started = False

    @property
    def db(self) -> TauDb:
        return self.episode.db

    @property
    def actions(self) -> list[Action]:
        return self.episode.actions

    @property
    def done(self) -> bool:
        return self.episode.done

    # --- what the agent is given ----------------------------------------------------------
    @property
    def wiki(self) -> str:
        """The policy text (the tool-calling agent's system prompt)."""
        return self.domain_data.wiki

    @property
    def rules(self) -> list[str]:
        return list(self.domain_data.rules)

    @property
    def tools_info(self) -> list[dict[str, Any]]:
        """OpenAI function-calling schemas of the domain's tools, in upstream order."""
        return deep_copy(self.domain_data.tools_info)

    # --- episode ----------------------------------------------------------------------------
    def reset(self) -> StepResult:
        """Fresh database and action log; the simulated user opens the conversation."""
        self.episode = TauEpisode(self.domain_data.agent_domain())
        self.reward_result = None
        self._started = True
        observation = self.user.reset(self.task.instruction)
        return StepResult(
            observation=observation, done=False, info=StepInfo(source="user", user_cost=self.user.total_cost)
        )

    def step(self, action_name: str, kwargs: Mapping[str, Any] | None = None) -> StepResult:
        """Apply one action. Steps after the end are allowed (as upstream) and act on the same state."""
        if not self._started:
            raise EnvStateError("TauEnv.step() called before reset()")
        observation, source, done = self.episode.apply(action_name, kwargs, self._respond)
        reward_result = None
        if done:
            reward_result = compute_reward(self.domain_data, self.split, self.task_index, self.db, self.actions)
            self.reward_result = reward_result
        info = StepInfo(source=source, user_cost=self.user.total_cost, reward_info=reward_result)
        reward = reward_result.reward if reward_result else None
        return StepResult(observation=observation, done=done, reward=reward, info=info)

    def _respond(self, content: str) -> tuple[str, bool]:
        observation = self.user.step(content)
        return observation, STOP_TOKEN in observation

    # --- inspection -------------------------------------------------------------------------
    def evaluate(self) -> RewardResult:
        """Score the current state without ending the episode (diagnostics; upstream scores an
        episode only when it ends, and one that never ends counts as reward 0)."""
        return compute_reward(self.domain_data, self.split, self.task_index, self.db, self.actions)

    def state_digest(self) -> str:
        """Canonical digest of the current database (see the data README)."""
        return self.db.digest()

    def export_db(self) -> dict[str, dict[str, Any]]:
        """An independent deep copy of the current database."""
        return self.db.to_dict()

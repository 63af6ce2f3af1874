"""One Tau-Bench episode: the agent's actions against a domain database and a simulated user.

Step semantics follow upstream tau-bench (spec section 3.2): every action is logged first;
``respond`` goes to the user simulator and ends the episode when the reply contains
``###STOP###``; a registered tool runs with its exceptions turned into ``"Error: ..."``
observations; ``transfer_to_human_agents`` ends the episode even when it fails; anything
else is ``"Unknown action <name>"``. The reward is computed when the episode ends and,
unlike upstream, leaves the agent's database and action log as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .data import RESPOND_ACTION, STOP_TOKEN, TERMINATE_TOOLS, Action, DomainData, UserTask
from .errors import EnvStateError, InvalidActionError
from .reward import RewardResult, compute_reward
from .state import TauDb, deep_copy
from .tools import call_tool, domain_tools
from .user import UserSimulator


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
        self._tools = domain_tools(domain_data.name)
        self.db = TauDb(domain_data.pristine)
        self.actions: list[Action] = []
        self.done = False
        self.reward_result: RewardResult | None = None
        self._started = False

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
        self.db = TauDb(self.domain_data.pristine)
        self.actions = []
        self.done = False
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
        if not isinstance(action_name, str):
            raise InvalidActionError(f"action name must be a string, got {type(action_name).__name__}")
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, Mapping):
            raise InvalidActionError(f"arguments of {action_name!r} must be a JSON object, got {type(kwargs).__name__}")
        if not all(isinstance(key, str) for key in kwargs):
            raise InvalidActionError(f"argument names of {action_name!r} must be strings")
        # The log and the tool get their own copies: the database never aliases the caller's objects.
        self.actions.append(Action(name=action_name, kwargs=deep_copy(dict(kwargs))))
        if action_name == RESPOND_ACTION:
            observation, source = self._respond(kwargs), "user"
            done = STOP_TOKEN in observation
        elif action_name in self._tools:
            observation = call_tool(self.domain_data.name, self._tools[action_name], self.db, deep_copy(dict(kwargs)))
            source, done = action_name, action_name in TERMINATE_TOOLS
        else:
            observation, source, done = f"Unknown action {action_name}", action_name, False
        reward_result = None
        if done:
            self.done = True
            reward_result = compute_reward(self.domain_data, self.split, self.task_index, self.db, self.actions)
            self.reward_result = reward_result
        info = StepInfo(source=source, user_cost=self.user.total_cost, reward_info=reward_result)
        reward = reward_result.reward if reward_result else None
        return StepResult(observation=observation, done=done, reward=reward, info=info)

    def _respond(self, kwargs: Mapping[str, Any]) -> str:
        if "content" not in kwargs:
            raise InvalidActionError("respond needs a 'content' argument (the message to the user)")
        content = kwargs["content"]
        if not isinstance(content, str):
            raise InvalidActionError(f"respond content must be a string, got {type(content).__name__}")
        return self.user.step(content)

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

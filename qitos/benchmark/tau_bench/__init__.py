"""Tau-Bench (retail, airline): a faithful re-implementation of sierra-research/tau-bench's envs.

Typical use::

    domain = load_domain(data_dir, "retail")           # data_dir = $QITOS_DATA_DIR/tau-bench
    env = TauEnv(domain, task_index=0, split="test", user=make_user("llm", model))
    first = env.reset().observation                     # the simulated user's opening message
    result = env.step("get_user_details", {"user_id": "..."})
    ...                                                 # until result.done; result.reward is 0/1
"""

from .data import DOMAIN_SPLITS, STOP_TOKEN, TERMINATE_TOOLS, Action, DomainData, Task, clear_cache, load_domain
from .digest import canonical_digest, upstream_data_hash
from .env import StepInfo, StepResult, TauEnv
from .errors import (
    EnvStateError,
    InvalidActionError,
    InvalidObservationError,
    TauDataError,
    TauError,
    UserSimulatorError,
)
from .reward import GoldState, RewardResult, compute_reward, gold_state
from .user import (
    USER_STRATEGIES,
    HumanUser,
    LLMUser,
    ReactUser,
    ReflectionUser,
    ScriptedUser,
    UserSimulator,
    VerifyUser,
    make_user,
)

__all__ = [
    "DOMAIN_SPLITS",
    "STOP_TOKEN",
    "TERMINATE_TOOLS",
    "USER_STRATEGIES",
    "Action",
    "DomainData",
    "EnvStateError",
    "GoldState",
    "HumanUser",
    "InvalidActionError",
    "InvalidObservationError",
    "LLMUser",
    "ReactUser",
    "ReflectionUser",
    "RewardResult",
    "ScriptedUser",
    "StepInfo",
    "StepResult",
    "TauDataError",
    "TauEnv",
    "TauError",
    "Task",
    "UserSimulator",
    "UserSimulatorError",
    "VerifyUser",
    "canonical_digest",
    "clear_cache",
    "compute_reward",
    "gold_state",
    "load_domain",
    "make_user",
    "upstream_data_hash",
]

"""Tau-Bench (retail, airline): a faithful re-implementation of sierra-research/tau-bench's envs.

The package in two sides (what a ``qit bench run`` puts in which process):

* agent side: ``agent_env`` (the factory the agent process calls), ``engine_env`` (the Engine's env and the
  tools, each action one ``env.step`` call to the scoring side);
* scoring side: ``adapter``, ``scoring`` (the episode behind ``serve``: it runs every action, holds the
  simulated user and the record of what it was told, and computes the reward of its own final state),
  ``episode`` (upstream's step semantics on the episode's database), the tools (``tools``, ``retail_tools``,
  ``airline_tools``, ``common_tools``), ``state``, ``digest``, ``data`` (the tasks: instructions, gold actions,
  outputs), ``user``, ``reward``, ``upstream``, ``options``, ``run_options``; ``metrics``, ``interop``,
  ``fetch`` work on rows and data;
* both: ``domain`` (a domain without its tasks: on the agent side also without its database), ``errors``, and
  ``tools.is_lookup`` (the agent side marks read-only tools with it).

``env.TauEnv`` is both sides in one process, for library use and the conformance fixtures::

    domain = load_domain(data_dir, "retail")           # data_dir = $QITOS_DATA_DIR/tau-bench
    env = TauEnv(domain, task_index=0, split="test", user=make_user("llm", model))
    first = env.reset().observation                     # the simulated user's opening message
    result = env.step("get_user_details", {"user_id": "..."})
    ...                                                 # until result.done; result.reward is 0/1
"""

from qitos.benchmark.tau_bench.data import DOMAIN_SPLITS, STOP_TOKEN, TERMINATE_TOOLS, Action, DomainData, Task, clear_cache, load_domain
from qitos.benchmark.tau_bench.digest import canonical_digest, upstream_data_hash
from qitos.benchmark.tau_bench.env import StepInfo, StepResult, TauEnv
from qitos.benchmark.tau_bench.errors import (
    EnvStateError,
    InvalidActionError,
    InvalidObservationError,
    TauDataError,
    TauError,
    UserSimulatorError,
)
from qitos.benchmark.tau_bench.reward import GoldState, RewardResult, compute_reward, gold_state
from qitos.benchmark.tau_bench.user import (
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

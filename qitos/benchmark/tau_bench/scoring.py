"""Scoring side: one episode's environment, its simulated user, the record of what it was told, and the reward.

The agent side never holds the task's instruction, its gold actions or outputs, nor the state that is
scored. It reaches this side through ``adapter.serve``: ``user.reset`` (the user's first message),
``env.step`` (one action: this side runs it on its own :class:`.episode.TauEpisode`, with the domain's
tools on its own database, ``respond`` going to the user here, and answers with the observation and
whether the episode ended) and ``env.fail`` (the agent's own failure, as upstream's agent raising: reward
0). :class:`TauScoring` refuses calls the protocol does not allow at that moment (a second reset, an
action before the reset or after the end). Every action it runs is traced from here (``env_step``, with
its arguments and observation; ``env_failure``), as are the simulated user's model calls
(``user_prompt``, ``user_model_call``) and the ``env_reset`` event that names the user's instruction.

The reward (:meth:`TauScoring.outcome`) is upstream's, computed from this side's episode: its database,
its action log, the end it saw (the user's stop, a terminating tool it ran) and what the user was told.
Nothing the agent side returns is used for it; its transcript (``traj``) is reported beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qitos.models.base import ModelError, ModelResponse, Usage
from qitos.models.deadline import TimeLeftExceeded

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.contract import AgentCallRefused
from qitos.benchmark.tau_bench.data import RESPOND_ACTION, STOP_TOKEN, DomainData
from qitos.benchmark.tau_bench.episode import TauEpisode
from qitos.benchmark.tau_bench.options import user_replies
from qitos.benchmark.tau_bench.errors import OutputsCheckError, TauDataError, TauError, UserSimulatorError
from qitos.benchmark.tau_bench.reward import RewardResult, compute_reward
from qitos.benchmark.tau_bench.run_options import few_shot_sample, run_options
from qitos.benchmark.tau_bench.state import deep_copy
from qitos.benchmark.tau_bench.tools import is_lookup
from qitos.benchmark.tau_bench.upstream import load_upstream
from qitos.benchmark.tau_bench.user import USER_STRATEGIES, ScriptedUser, UserSimulator, make_user

USER_EVENT = "user_model_call"


@dataclass
class TauRuntime(TaskRuntime):
    """The scoring side's runtime of one task: `env` is the in-process agent-side env (oracles run on it);
    `scoring` the user and the reward."""

    scoring: "TauScoring | None" = None


class DirectLink:
    """The in-process runtime's link to the scoring side: the same `serve` calls, JSON in and out."""

    def __init__(self, adapter: Any, task: Any, runtime: TaskRuntime) -> None:
        self.adapter, self.task, self.runtime = adapter, task, runtime

    def call(self, method: str, payload: dict[str, Any] | None = None) -> Any:
        reply = self.adapter.serve(self.task, self.runtime, method, json.loads(json.dumps(payload or {})))
        return json.loads(json.dumps(reply))


class TauScoring:
    """One episode's environment (database, action log, end), its simulated user, what it was told, and the reward."""

    def __init__(self, data: DomainData, split: str, task_index: int, options: dict[str, Any],
                 runtime: TaskRuntime) -> None:
        self.data, self.split, self.task_index = data, split, task_index
        self.options = dict(options or {})
        self.runtime = runtime
        self.instruction = data.user_task(split, task_index).instruction
        self.user: UserSimulator | None = None
        self.user_config: dict[str, Any] = {}  # the model-driven user's model name and sampling (recorded)
        self.said: list[Any] = []  # every message the agent sent the user, in order
        self.episode = TauEpisode(data.agent_domain())  # the scored state: this side's database and action log
        self.started = False
        self.failure: str | None = None  # the episode failed: the user's model, an invalid action, the agent's own

    # --- the user -------------------------------------------------------------------------------
    @property
    def strategy(self) -> str:
        return str(self.options.get("user_strategy") or "llm")

    def use_user(self, user: UserSimulator) -> None:
        """Set the user (the oracle's scripted one) instead of the run options' user; before the reset."""
        if self.started:
            raise AgentCallRefused("the simulated user is set before the conversation starts")
        self.user, self.user_config = user, {}

    def oracle_user(self) -> UserSimulator:
        """The oracle's user: says the instruction, then ###STOP### (scoring side: it knows the instruction)."""
        user = ScriptedUser([self.instruction])
        self.use_user(user)
        return user

    def emit(self, kind: str, payload: dict[str, Any]) -> None:
        """Into the run's trace: through the job's `trace_event`, or (in-process) the env's own event sink."""
        if self.runtime.trace_event is not None:
            self.runtime.trace_event(kind, payload)
        elif hasattr(self.runtime.env, "emit"):
            self.runtime.env.emit(kind, payload)

    def _build_user(self) -> UserSimulator:
        """The user the run options ask for: ``user_strategy``, ``user_model`` (default the agent's), sampling,
        ``user_replies``. When the agent's model replays a recorded run, a model-driven user replays that run's
        recorded replies."""
        options, strategy = self.options, self.strategy
        if strategy not in USER_STRATEGIES:
            raise UserSimulatorError(f"--option user_strategy={strategy}: unknown; choose one of "
                                     f"{', '.join(USER_STRATEGIES)}")
        if strategy == "scripted":
            return ScriptedUser(user_replies(options.get("user_replies")) or [self.instruction])
        if strategy == "human":
            return make_user("human")
        make = getattr(self.runtime, "make_model", None)
        if make is None:
            raise UserSimulatorError("no model for the simulated user: this runtime was not given the run's models")
        agent_model = make(None)
        if getattr(agent_model, "family", None) == "replay" and getattr(agent_model, "run_dir", None):
            model: Any = RecordedUserModel(agent_model.run_dir)
        elif options.get("user_model"):
            model = make(options["user_model"])
        else:
            model = agent_model
        sampling = user_sampling(options)
        user = make_user(strategy, model, protocol=load_upstream(self.data.root), emit=self.emit, **sampling)
        self.user_config = {"model": getattr(model, "name", None), **sampling}
        return user

    # --- serve ----------------------------------------------------------------------------------
    def reset(self) -> dict[str, Any]:
        if self.started:
            raise AgentCallRefused("the conversation has already started (user.reset is called once)")
        self.started = True
        try:
            if self.user is None:
                self.user = self._build_user()
            observation = self.user.reset(self.instruction)
        except (TauError, ModelError) as exc:
            return self._failed(exc)
        # The user's instruction goes to the trace (the board shows it above the chat), never to the agent.
        self.emit("env_reset", {"observation": observation, "user_strategy": self.user.strategy,
                                "user": self.user_config, "user_instruction": self.instruction})
        return {"observation": observation}

    def step(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``env.step {action, kwargs}``: run one action on this side's episode, trace it, and answer with the
        observation, whether this step and the episode ended, the records written so far and, after an action
        that may write, the database's digest."""
        if not self.started or self.user is None:
            raise AgentCallRefused("env.step before user.reset: the user has not opened the conversation")
        if self.failure is not None or self.episode.done:
            raise AgentCallRefused("the episode has ended; no further actions are taken")
        if "action" not in payload:
            raise AgentCallRefused("env.step needs an 'action' (the tool's name) and its 'kwargs'")
        name, kwargs = payload["action"], payload.get("kwargs")
        try:
            observation, source, done = self.episode.apply(name, kwargs, self._respond)
        except (TauError, ModelError) as exc:
            # Upstream lets these escape from step, which ends the episode with reward 0.
            reply = self._failed(exc)
            self.emit("env_failure", {"action": name, "error": self.failure})
            return reply
        written = {coll: sorted(keys) for coll, keys in sorted(self.episode.db.written().items())}
        reply: dict[str, Any] = {"observation": observation, "source": source, "done": done,
                                 "ended": self.episode.done, "written": written}
        if name != RESPOND_ACTION and not is_lookup(name):
            reply["db_digest"] = self.episode.db.digest()
        self.emit("env_step", {"action": name, "kwargs": deep_copy(kwargs), "source": source, "done": done,
                               "observation": observation, **({"db_digest": reply["db_digest"]}
                                                              if "db_digest" in reply else {})})
        return reply

    def _failed(self, exc: Exception) -> dict[str, Any]:
        if isinstance(exc, TimeLeftExceeded) and not getattr(self.user, "calls", 0):
            # --task-timeout ran out waiting for a user model that never answered in this task: its endpoint
            # hangs, a failure outside the agent (model_error: unscored, run again). One that had answered is
            # treated as the agent's own model is: the task's time ran out (budget_time; models/deadline.py).
            exc = ModelError(f"the simulated user's model never answered in this task: {exc}")
        self.failure = f"{type(exc).__name__}: {exc}"
        return {"failed": {"type": type(exc).__name__, "message": str(exc)}}

    def fail(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``env.fail {reason}``: the agent side ends the episode as upstream's agent raising does (reward 0)."""
        if self.failure is None:
            self.failure = str(payload.get("reason") or "the agent side ended the episode")[:2000]
            self.emit("env_failure", {"action": None, "error": self.failure})
        return {"failure": self.failure}

    def _respond(self, content: Any) -> tuple[str, bool]:
        """The user's reply to one message said to it, and whether it ends the conversation."""
        assert self.user is not None
        self.said.append(content)  # said, whatever the user does with it (upstream logs the action first)
        observation = self.user.step(content)
        if not isinstance(observation, str):
            raise UserSimulatorError(f"the simulated user's reply is not text: {observation!r}")
        return observation, STOP_TOKEN in observation

    # --- reward ---------------------------------------------------------------------------------
    def outcome(self, state: Any = None) -> dict[str, Any]:
        """Reward (0 unless the episode ended) and what explains it, from this side's episode. `state`, the agent
        side's final state, is its own account: only its transcript (``traj``) is reported, never scored."""
        state = state if isinstance(state, dict) else {}
        failure = self.failure
        info: dict[str, Any] = {
            "domain": self.data.name,
            "split": self.split,
            "task_index": self.task_index,
            "user_strategy": self.user.strategy if self.user else self.strategy,
            "user_model": self.user_config.get("model"),
            "user_sampling": {k: v for k, v in self.user_config.items() if k != "model"},
            "user_cost": self.user.total_cost if self.user else None,
        }
        if isinstance(state.get("traj"), list):
            info["traj"] = state["traj"]
        if not self.started:
            return {**info, "done": False, "failure": failure, "reward": 0.0}
        episode = self.episode
        done = failure is None and episode.done
        actions = list(episode.actions)
        try:
            result: RewardResult = compute_reward(self.data, self.split, self.task_index, episode.db, actions,
                                                  said=self.said)
        except OutputsCheckError as exc:
            # Upstream scores an ended episode only, and there this raises: reward 0, the reason recorded.
            failure = failure or (f"{type(exc).__name__}: {exc}" if done else None)
            return {**info, "done": False, "failure": failure, "reward": 0.0, "ended_by": episode.ended_by,
                    "actions_taken": [action.model_dump() for action in actions],
                    "last_message": self.said[-1] if self.said else None}
        info.update(
            done=done,
            failure=failure,
            ended_by=episode.ended_by,
            reward=result.reward if done else 0.0,
            r_actions=result.r_actions,
            r_outputs=result.r_outputs,
            outputs=result.outputs,
            final_state_digest=result.final_state_digest,
            gold_state_digest=result.gold_state_digest,
            actions_taken=[action.model_dump() for action in result.actions_taken],
            last_message=self.said[-1] if self.said else None,
        )
        if not done:
            info["reward_if_ended"] = result.reward  # diagnostic: the episode never ended, so it scores 0
        return info


def agent_texts(data: DomainData, split: str, task_index: int, trial: int, options: dict[str, Any]) -> dict[str, Any]:
    """The upstream prompt texts the agent side's recipes need, rendered here (upstream's files stay in the data
    dir): the chat ReAct/Act prompts, the tool-output prefix, the respond field, and this task × trial's few-shot
    prompt. A text that cannot be made carries why (``<name>_error``); the recipe that needs it raises that."""
    try:
        protocol = load_upstream(data.root)
    except TauDataError as exc:
        return {"error": str(exc)}
    key = (str(data.root), data.name)
    texts = _COMMON.get(key)
    if texts is None:
        texts = _COMMON[key] = {
            "react_prompt": protocol.chat_react_prompt(data.wiki, data.tools_info, use_reasoning=True),
            "act_prompt": protocol.chat_react_prompt(data.wiki, data.tools_info, use_reasoning=False),
            "api_output_prefix": protocol.api_output_prefix,
            "respond_field": protocol.constants["RESPOND_ACTION_FIELD_NAME"],
        }
    out = dict(texts)
    try:
        displays = protocol.few_shot_displays(data.name)
        count = len(data.split_tasks(split))
        chosen = few_shot_sample(run_options(options), count, len(displays), trial, task_index)
        out["few_shot_prompt"] = protocol.few_shot_system_prompt(data.wiki, [displays[i] for i in chosen])
    except (TauDataError, ValueError) as exc:
        out["few_shot_prompt_error"] = str(exc)
    return out


_COMMON: dict[tuple[str, str], dict[str, Any]] = {}


class RecordedUserModel:
    """Serves the simulated user's replies recorded in a run's events, in order (deterministic replay)."""

    family = "replay"
    provider = "qitos"

    def __init__(self, run_dir: Path | str) -> None:
        from qitos.trace.reader import read_events, read_manifest

        self.run_dir = Path(run_dir)
        self.name = f"replay-user:{read_manifest(self.run_dir).run_id}"
        self.params: dict[str, Any] = {}
        self.calls = [e.payload for e in read_events(self.run_dir) if e.kind == USER_EVENT]
        self.position = 0

    def complete(self, messages: list[dict[str, Any]], tools: Any = None, **params: Any) -> ModelResponse:
        if self.position >= len(self.calls):
            raise ModelError(f"replay of {self.run_dir} has no more recorded user replies (it had {len(self.calls)})")
        call = self.calls[self.position]
        self.position += 1
        return ModelResponse(
            text=call.get("text"), usage=Usage(**(call.get("usage") or {})), cost=call.get("cost"),
            latency_seconds=call.get("latency_seconds") or 0.0, model=call.get("model") or "",
        )  # fmt: skip


def user_sampling(options: dict[str, Any]) -> dict[str, Any]:
    """``--user-temperature``, ``--user-seed``, ``--user-top-p``, ``--user-reasoning-effort``,
    ``--user-request-timeout``, ``--user-max-retries``, ``--user-extra-body`` (options ``user_<name>``); unset
    ones are absent."""
    import json

    out: dict[str, Any] = {}
    kinds = (("temperature", float), ("seed", int), ("top_p", float), ("reasoning_effort", str),
             ("request_timeout", float), ("max_retries", int), ("extra_body", json.loads))
    for key, kind in kinds:
        value = options.get(f"user_{key}")
        if value is None or value == "":
            continue
        try:
            out[key] = kind(value)
        except (TypeError, ValueError):
            name = "JSON object" if key == "extra_body" else kind.__name__
            raise ValueError(f"--user-{key.replace('_', '-')} {value!r} is not a valid {name}") from None
    return out

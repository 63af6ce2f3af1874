"""The engine-facing side of one Tau-Bench episode: tools that step a :class:`TauEnv`, and its user.

``TauEngineEnv`` is what ``adapter.prepare`` hands to the Engine (``runtime.env``). It follows
the Engine's environment hooks: ``bind_events`` (the simulated user's model calls become
``user_model_call`` trace events), ``reset`` (the user opens the conversation; its first message
is ``first_message``), ``is_terminal`` (the episode is done, or failed the way upstream's step
raises), ``step_summary`` (the step's ``state_diff``) and ``close``.

Every tool is a :class:`qitos.core.tools.Tool` whose call is one ``TauEnv.step``. Arguments go to
the env unvalidated: upstream lets Python itself word the errors of missing or unexpected
arguments, and logs every action, so the kernel's schema check would change observations.

The user simulator needs models that only a recipe can build (``RecipeContext.make_model``), so
recipes call :func:`setup_user` (a ``--runner`` agent must too) before the Engine resets the env.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qitos.core.tools import Tool, ToolRegistry
from qitos.models.base import ModelError, ModelResponse, Usage

from .data import RESPOND_ACTION, DomainData, UserTask
from .env import TauEnv
from .errors import EnvStateError, TauError
from .reward import RewardResult
from .upstream import load_upstream
from .user import USER_STRATEGIES, ScriptedUser, UserSimulator, make_user

USER_EVENT = "user_model_call"
RESPOND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"content": {"type": "string", "description": "The message to send to the user."}},
    "required": ["content"],
}
_READ_ONLY_PREFIXES = ("get_", "find_", "list_", "search_")


class EnvTool(Tool):
    """A tool whose call is one env step; the arguments reach the env exactly as the model wrote them."""

    def invoke(self, arguments: dict[str, Any]) -> Any:
        return self.fn(arguments)


class TauToolRegistry(ToolRegistry):
    """The tools shown to the model; any other name still reaches the env, as upstream's step does.

    Upstream's tool-calling agent is never shown a ``respond`` tool (its text replies are the
    respond action), and a made-up tool name gets the env's "Unknown action <name>".
    """

    def __init__(self, tools: list[Tool], env: "TauEngineEnv") -> None:
        super().__init__(tools)
        self._env = env

    def get(self, name: str) -> Tool | None:
        return super().get(name) or self._env.tool(name)


class TauEngineEnv:
    """One task of one split of a domain, driven by the Engine. Not reusable across trials."""

    def __init__(self, domain: DomainData, split: str, task_index: int) -> None:
        self.domain = domain
        self.split = split
        self.task_index = task_index
        self.task: UserTask = domain.user_task(split, task_index)  # validates split and index; no gold
        self.user: UserSimulator | None = None
        self.user_config: dict[str, Any] = {}  # the model-driven user's model name and sampling (recorded)
        self.transcript: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None  # (system, messages)
        self.deterministic = True  # every user reply is recorded (see RecordedUserModel); False for a human
        self.env: TauEnv | None = None
        self.first_message: str | None = None
        self.failure: str | None = None
        self._sink: Any = None
        self._step_actions: list[dict[str, Any]] = []

    # --- tools -------------------------------------------------------------------------------
    @property
    def wiki(self) -> str:
        return self.domain.wiki

    @property
    def tools_info(self) -> list[dict[str, Any]]:
        """The domain's function schemas exactly as in tools.json (upstream order)."""
        return json.loads(json.dumps(self.domain.tools_info))

    def tool(self, name: str) -> EnvTool:
        """The tool `name` (a domain tool, ``respond``, or any other name the env will refuse)."""
        schema = next((t["function"] for t in self.domain.tools_info if t["function"]["name"] == name), None)
        if name == RESPOND_ACTION:
            schema = {"name": name, "description": "Send a message to the user.", "parameters": RESPOND_SCHEMA}
        elif schema is None:
            schema = {"name": name, "description": "(not a tool of this domain)", "parameters": {"type": "object"}}
        return EnvTool(
            name=name,
            description=schema.get("description", ""),
            input_schema=json.loads(json.dumps(schema["parameters"])),
            fn=lambda arguments: self.act(name, arguments),
            read_only=_is_lookup(name),
            origin="tau-bench",
        )

    def domain_tools(self) -> list[EnvTool]:
        return [self.tool(t["function"]["name"]) for t in self.domain.tools_info]

    def registry(self, *, with_respond: bool) -> TauToolRegistry:
        """Domain tools in upstream order, plus a listed ``respond`` tool for text protocols."""
        tools: list[Tool] = list(self.domain_tools())
        if with_respond:
            tools.append(self.tool(RESPOND_ACTION))
        return TauToolRegistry(tools, self)

    # --- user --------------------------------------------------------------------------------
    def attach_user(self, user: UserSimulator) -> None:
        if self.env is not None:
            raise EnvStateError("attach the simulated user before the episode starts (before reset)")
        self.user = user
        self.deterministic = user.strategy != "human"

    def emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink(kind, payload)

    # --- Engine hooks --------------------------------------------------------------------------
    def bind_events(self, sink: Any) -> None:
        self._sink = sink

    def reset(self, task: Any = None) -> str:
        if self.user is None:
            raise EnvStateError(
                "no simulated user attached to the tau-bench env; a --runner agent must call "
                "qitos.benchmark.tau_bench.engine_env.setup_user(ctx) in its builder"
            )
        if self.env is not None:
            raise EnvStateError("a tau-bench episode runs once; prepare a new runtime for another trial")
        self.env = TauEnv(self.domain, self.task_index, self.split, user=self.user)
        self.first_message = self.env.reset().observation
        self.emit("env_reset", {"observation": self.first_message, "user_strategy": self.user.strategy,
                                "user": self.user_config})
        return self.first_message

    def act(self, name: str, arguments: dict[str, Any]) -> str:
        """One env step; returns the observation. Raises when upstream's step would (episode over)."""
        if self.env is None:
            raise EnvStateError("the tau-bench env was not reset")
        if self.is_terminal():
            raise EnvStateError("the conversation has already ended; no further actions are taken")
        try:
            result = self.env.step(name, arguments)
        except (TauError, ModelError) as exc:
            # Upstream lets these escape from step, which ends the episode with reward 0.
            self.failure = f"{type(exc).__name__}: {exc}"
            self.emit("env_failure", {"action": name, "error": self.failure})
            raise
        record = {"action": name, "source": result.info.source, "done": result.done, "reward": result.reward}
        self._step_actions.append(record)
        self.emit("env_step", record)
        return result.observation

    def fail(self, reason: str) -> None:
        """End the episode as upstream does when its agent raises (e.g. tool arguments that are not JSON):
        no further step, reward 0, and `reason` recorded as the failure."""
        self.failure = reason
        self.emit("env_failure", {"action": None, "error": reason})

    def is_terminal(self) -> bool:
        return self.failure is not None or (self.env is not None and self.env.done)

    def step_summary(self) -> dict[str, Any]:
        """Actions of this step, records written so far, and the database digest after a write."""
        actions, self._step_actions = self._step_actions, []
        env = self.env
        if env is None:
            return {"actions": actions}
        summary: dict[str, Any] = {
            "actions": actions,
            "written": {name: sorted(keys) for name, keys in sorted(env.db.written().items())},
            "done": env.done,
        }
        if any(a["action"] != RESPOND_ACTION and not _is_lookup(a["action"]) for a in actions):
            summary["db_digest"] = env.state_digest()
        if self.failure:
            summary["failure"] = self.failure
        return summary

    def close(self) -> None:
        """Nothing to release: the evaluator still reads the final state after the Engine closes."""

    def release(self) -> None:
        self.env = None
        self.user = None
        self._sink = None

    # --- outcome ---------------------------------------------------------------------------
    def outcome(self) -> dict[str, Any]:
        """Reward (0 unless the episode ended) and what explains it; never changes the agent's state."""
        info: dict[str, Any] = {
            "domain": self.domain.name,
            "split": self.split,
            "task_index": self.task_index,
            "user_strategy": self.user.strategy if self.user else None,
            "user_model": self.user_config.get("model"),
            "user_sampling": {k: v for k, v in self.user_config.items() if k != "model"},
            "user_cost": self.user.total_cost if self.user else None,
            "done": bool(self.env and self.env.done),
            "failure": self.failure,
        }
        if self.transcript is not None:
            info["traj"] = [*self.transcript[0], *self.transcript[1]]
        if self.env is None:
            return {**info, "reward": 0.0}
        ended = self.env.done and self.env.reward_result is not None
        result: RewardResult = self.env.reward_result if ended else self.env.evaluate()  # type: ignore[assignment]
        info.update(
            reward=result.reward if ended else 0.0,
            r_actions=result.r_actions,
            r_outputs=result.r_outputs,
            outputs=result.outputs,
            final_state_digest=result.final_state_digest,
            gold_state_digest=result.gold_state_digest,
            actions_taken=[action.model_dump() for action in result.actions_taken],
            last_message=_last_respond(result),
        )
        if not ended:
            info["reward_if_ended"] = result.reward  # diagnostic: the episode never ended, so it scores 0
        return info


def _is_lookup(name: str) -> bool:
    """Tools that never write the database (by upstream's naming: get_, find_, list_, search_)."""
    return name in ("calculate", "think") or name.startswith(_READ_ONLY_PREFIXES)


def _last_respond(result: RewardResult) -> str | None:
    said = [a.kwargs.get("content") for a in result.actions_taken if a.name == RESPOND_ACTION]
    return said[-1] if said else None


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


def user_replies(value: Any) -> list[str] | None:
    """``--option user_replies=...``: a JSON list of strings, or a path to a file of one reply per line."""
    if value is None or value == "":
        return None
    if isinstance(value, list):
        replies = value
    elif str(value).lstrip().startswith("["):
        try:
            replies = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--option user_replies is not a valid JSON list ({exc.msg})") from None
    else:
        path = Path(str(value)).expanduser()
        if not path.is_file():
            raise ValueError(
                f"--option user_replies={value}: no such file (give a JSON list, or a file with one reply a line)"
            )
        replies = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not all(isinstance(reply, str) for reply in replies):
        raise ValueError("--option user_replies must hold strings only")
    return list(replies)


def user_sampling(options: dict[str, Any]) -> dict[str, Any]:
    """``--user-temperature`` / ``--user-seed`` (options ``user_temperature``, ``user_seed``); unset ones are absent."""
    out: dict[str, Any] = {}
    for key, kind in (("temperature", float), ("seed", int)):
        value = options.get(f"user_{key}")
        if value is None or value == "":
            continue
        try:
            out[key] = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"--user-{key} {value!r} is not a valid {kind.__name__}") from None
    return out


def setup_user(ctx: Any, *, strategy: str | None = None, replies: Sequence[str] | None = None) -> UserSimulator:
    """Build the simulated user from the run options and attach it to ``ctx.runtime.env``.

    Options: ``user_strategy`` (llm, react, verify, reflection, scripted, human; default llm),
    ``user_model`` (set by ``--user-model``; default: the agent's model), ``user_temperature`` and
    ``user_seed`` (``--user-temperature``, ``--user-seed``; unset: not sent, as upstream),
    ``user_replies`` (scripted; default: the task instruction, then ``###STOP###``). When the
    agent's model replays a recorded run, a model-driven user replays that run's recorded replies.
    """
    env: TauEngineEnv = ctx.runtime.env
    options = ctx.options or {}
    strategy = strategy or options.get("user_strategy") or "llm"
    if strategy not in USER_STRATEGIES:
        raise ValueError(f"--option user_strategy={strategy}: unknown; choose one of {', '.join(USER_STRATEGIES)}")
    if strategy == "scripted":
        scripted = list(replies) if replies is not None else user_replies(options.get("user_replies"))
        user: UserSimulator = ScriptedUser(scripted or [env.task.instruction])
    elif strategy == "human":
        user = make_user("human")
    else:
        agent_model = ctx.make_model(None)
        if getattr(agent_model, "family", None) == "replay" and getattr(agent_model, "run_dir", None):
            model: Any = RecordedUserModel(agent_model.run_dir)
        elif options.get("user_model"):
            model = ctx.make_model(options["user_model"])
        else:
            model = agent_model
        sampling = user_sampling(options)
        user = make_user(strategy, model, protocol=load_upstream(env.domain.root), emit=env.emit, **sampling)
        env.user_config = {"model": getattr(model, "name", None), **sampling}
    env.attach_user(user)
    return user

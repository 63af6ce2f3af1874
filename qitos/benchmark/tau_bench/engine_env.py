"""Agent side: one Tau-Bench episode as the Engine drives it, with tools that step it on the scoring side.

``TauEngineEnv`` is ``runtime.env`` of the agent side (built by :mod:`.agent_env`). It holds the
domain without its tasks (the policy, the rules and the tool schemas the agent is shown) and a link
to the scoring side, which holds everything that decides the score: the episode's database and action
log (:class:`.episode.TauEpisode`), the simulated user (it alone knows the task's instruction), and the
flags that end the episode. Every action is one ``env.step`` call across (a small JSON round trip);
the scoring side runs it and answers with the observation and what the step did. Engine hooks:
``bind_events``, ``reset`` (``user.reset``: the user's first message), ``is_terminal`` (as the scoring
side last said, or after a local failure), ``step_summary`` (the step's ``state_diff``, from the
scoring side's replies), ``final_state`` (the agent's own account, reported with the reward, never
used for it) and ``close``.

Every tool is a :class:`qitos.core.tools.Tool` whose call is one episode step; ``respond`` is the
action that talks to the user. Arguments go across unvalidated: upstream lets Python itself word the
errors of missing or unexpected arguments, and logs every action, so the kernel's schema check would
change observations. The simulated user is the benchmark's, so no recipe and no ``--runner`` agent
sets one up.
"""

from __future__ import annotations

import json
from typing import Any

from qitos.core.tools import Tool, ToolRegistry
from qitos.models.base import ModelError
from qitos.models.deadline import TimeLeftExceeded

from qitos.benchmark.tau_bench import errors
from qitos.benchmark.tau_bench.data import RESPOND_ACTION
from qitos.benchmark.tau_bench.domain import AgentDomain
from qitos.benchmark.tau_bench.errors import EnvStateError, InvalidActionError, TauDataError, UserSimulatorError
from qitos.benchmark.tau_bench.state import deep_copy
from qitos.benchmark.tau_bench.tools import is_lookup as _is_lookup

RESPOND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"content": {"type": "string", "description": "The message to send to the user."}},
    "required": ["content"],
}
# how the scoring side names a failure of a step (the user's model, an invalid action) -> the exception raised here
STEP_FAILURES: dict[str, type[Exception]] = {
    "ModelError": ModelError,
    "TimeLeftExceeded": TimeLeftExceeded,  # the task's time ran out waiting for a user model that had answered
    **{name: cls for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, errors.TauError)},
}


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
    """One task of one split of a domain, driven by the Engine. Not reusable across trials.

    `link` reaches the scoring side (``user.reset``, ``env.step``, ``env.fail``); `texts` are the upstream
    prompt texts the recipes need, rendered by the scoring side (see ``scoring.agent_texts``)."""

    def __init__(self, domain: AgentDomain, split: str, task_index: int, link: Any, *, trial: int = 0,
                 user_strategy: str = "llm", texts: dict[str, Any] | None = None, db_digest: str | None = None) -> None:
        self.domain = domain
        self.split = split
        self.task_index = task_index
        self.trial = trial
        self.link = link
        self.user_strategy = user_strategy
        self.texts = dict(texts or {})
        self.transcript: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None  # (system, messages)
        self.deterministic = user_strategy != "human"  # every user reply is recorded; a human's is not replayable
        self.started = False
        self.first_message: str | None = None
        self.failure: str | None = None
        self.done = False  # the scoring side said the episode ended (the user's stop, a terminating tool)
        self.actions: list[dict[str, Any]] = []  # the actions this side sent and the scoring side ran (its account)
        self.written: dict[str, list[str]] = {}  # records written so far, as the scoring side last said
        # the database's digest, as the scoring side last said (first: the pristine one, which it sends)
        self.db_digest = db_digest or (domain.pristine.digest() if domain.pristine is not None else "")
        self._sink: Any = None
        self._step_actions: list[dict[str, Any]] = []

    # --- what the agent is given ------------------------------------------------------------
    @property
    def wiki(self) -> str:
        return self.domain.wiki

    @property
    def tools_info(self) -> list[dict[str, Any]]:
        """The domain's function schemas exactly as in tools.json (upstream order)."""
        return json.loads(json.dumps(self.domain.tools_info))

    def text(self, name: str) -> Any:
        """An upstream prompt text (e.g. ``react_prompt``, ``few_shot_prompt``); why it is missing, raised."""
        if name in self.texts:
            return self.texts[name]
        why = self.texts.get(f"{name}_error") or self.texts.get("error") or f"no upstream text '{name}'"
        raise TauDataError(why)

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

    def emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink(kind, payload)

    # --- Engine hooks --------------------------------------------------------------------------
    def bind_events(self, sink: Any) -> None:
        self._sink = sink

    def reset(self, task: Any = None) -> str:
        """The simulated user (on the scoring side) opens the conversation; the scoring side traces it."""
        if self.started:
            raise EnvStateError("a tau-bench episode runs once; prepare a new runtime for another trial")
        self.started = True
        self.first_message = self._call("user.reset", {})["observation"]
        return self.first_message

    def act(self, name: str, arguments: dict[str, Any]) -> str:
        """One env step, run by the scoring side; returns the observation. Raises when upstream's step would
        (the episode then fails, reward 0)."""
        if not self.started:
            raise EnvStateError("the tau-bench env was not reset")
        if self.is_terminal():
            raise EnvStateError("the conversation has already ended; no further actions are taken")
        if isinstance(arguments, dict) and not all(isinstance(key, str) for key in arguments):
            exc = InvalidActionError(f"argument names of {name!r} must be strings")  # JSON would make them so
            self.fail(f"{type(exc).__name__}: {exc}")
            raise exc
        try:
            reply = self._call("env.step", {"action": name, "kwargs": arguments})
        except (errors.TauError, ModelError) as exc:
            self.failure = f"{type(exc).__name__}: {exc}"  # the scoring side recorded it, and traced it
            raise
        self.done = bool(reply.get("ended"))
        self.written = reply.get("written") or {}
        if reply.get("db_digest"):
            self.db_digest = str(reply["db_digest"])
        self.actions.append({"name": name, "kwargs": deep_copy(arguments)})
        self._step_actions.append({"action": name, "source": reply.get("source"), "done": bool(reply.get("done"))})
        return str(reply["observation"])

    def _call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        reply = self.link.call(method, payload)
        failed = reply.get("failed") if isinstance(reply, dict) else None
        if failed:
            raise STEP_FAILURES.get(str(failed.get("type")), UserSimulatorError)(str(failed.get("message")))
        if not isinstance(reply, dict) or not isinstance(reply.get("observation"), str):
            raise UserSimulatorError(f"the scoring side answered {method} with {str(reply)[:200]}")
        return reply

    def fail(self, reason: str) -> None:
        """End the episode as upstream does when its agent raises (e.g. tool arguments that are not JSON):
        no further step, reward 0, and `reason` recorded as the failure (by the scoring side, which traces it)."""
        self.failure = reason
        self.link.call("env.fail", {"reason": reason})

    def is_terminal(self) -> bool:
        return self.failure is not None or self.done

    def step_summary(self) -> dict[str, Any]:
        """Actions of this step, records written so far, and the database digest after a write (as the scoring
        side reported them)."""
        actions, self._step_actions = self._step_actions, []
        if not self.started:
            return {"actions": actions}
        summary: dict[str, Any] = {"actions": actions, "written": dict(self.written), "done": self.done}
        if any(a["action"] != RESPOND_ACTION and not _is_lookup(a["action"]) for a in actions):
            summary["db_digest"] = self.db_digest
        if self.failure:
            summary["failure"] = self.failure
        return summary

    def state_digest(self) -> str:
        """Canonical digest of the episode's database, as the scoring side last reported it."""
        return self.db_digest

    def final_state(self) -> dict[str, Any]:
        """The agent side's own account: its actions, its failure and its messages (upstream's ``traj``). Reported
        with the reward; the reward comes from the scoring side's own episode, never from this."""
        return {
            "actions": deep_copy(self.actions),
            "failure": self.failure,
            "traj": deep_copy([*self.transcript[0], *self.transcript[1]]) if self.transcript is not None else None,
        }

    def close(self) -> None:
        """Nothing to release."""

    def release(self) -> None:
        self._sink = None


def setup_user(ctx: Any, **_: Any) -> None:
    """Kept for older ``--runner`` agents: the simulated user is the benchmark's own, on the scoring side, and
    every agent meets it with no code of its own. Does nothing."""
    return None

"""Agent side: one Tau-Bench episode as the Engine drives it, with tools that step it.

``TauEngineEnv`` is ``runtime.env`` of the agent side (built by :mod:`.agent_env`). It holds the
domain without its tasks, the episode's database and action log, and a link to the scoring side,
which holds the simulated user (it alone knows the task's instruction). Engine hooks: ``bind_events``,
``reset`` (asks the scoring side for the user's first message: ``user.reset``), ``is_terminal`` (the
user ended the conversation, as the scoring side says, a terminating tool ran, or the episode failed the
way upstream's step raises), ``step_summary`` (the step's ``state_diff``), ``final_state`` (what the
scoring side scores: the records the episode wrote, and its action log) and ``close``.

Every tool is a :class:`qitos.core.tools.Tool` whose call is one episode step; ``respond`` becomes
``user.respond`` on the scoring side. Arguments go to the episode unvalidated: upstream lets Python
itself word the errors of missing or unexpected arguments, and logs every action, so the kernel's
schema check would change observations. The simulated user is the benchmark's, so no recipe and no
``--runner`` agent sets one up.
"""

from __future__ import annotations

import json
from typing import Any

from qitos.core.tools import Tool, ToolRegistry
from qitos.models.base import ModelError

from .data import RESPOND_ACTION
from .domain import AgentDomain
from .episode import TauEpisode
from .errors import EnvStateError, TauDataError, TauError, UserSimulatorError
from .state import deep_copy

RESPOND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"content": {"type": "string", "description": "The message to send to the user."}},
    "required": ["content"],
}
_READ_ONLY_PREFIXES = ("get_", "find_", "list_", "search_")
# how the scoring side names a failure of the simulated user -> the exception the agent side raises
USER_FAILURES = {"ModelError": ModelError, "UserSimulatorError": UserSimulatorError}


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

    `link` reaches the scoring side (``user.reset``, ``user.respond``); `texts` are the upstream prompt
    texts the recipes need, rendered by the scoring side (see ``scoring.agent_texts``)."""

    def __init__(self, domain: AgentDomain, split: str, task_index: int, link: Any, *, trial: int = 0,
                 user_strategy: str = "llm", texts: dict[str, Any] | None = None) -> None:
        self.domain = domain
        self.split = split
        self.task_index = task_index
        self.trial = trial
        self.link = link
        self.user_strategy = user_strategy
        self.texts = dict(texts or {})
        self.transcript: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None  # (system, messages)
        self.deterministic = user_strategy != "human"  # every user reply is recorded; a human's is not replayable
        self.episode: TauEpisode | None = None
        self.first_message: str | None = None
        self.failure: str | None = None
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
        if self.episode is not None:
            raise EnvStateError("a tau-bench episode runs once; prepare a new runtime for another trial")
        self.episode = TauEpisode(self.domain)
        self.first_message = self._user("user.reset", {})["observation"]
        return self.first_message

    def act(self, name: str, arguments: dict[str, Any]) -> str:
        """One env step; returns the observation. Raises when upstream's step would (episode over)."""
        if self.episode is None:
            raise EnvStateError("the tau-bench env was not reset")
        if self.is_terminal():
            raise EnvStateError("the conversation has already ended; no further actions are taken")
        try:
            observation, source, done = self.episode.apply(name, arguments, self._respond)
        except (TauError, ModelError) as exc:
            # Upstream lets these escape from step, which ends the episode with reward 0.
            self.failure = f"{type(exc).__name__}: {exc}"
            self.emit("env_failure", {"action": name, "error": self.failure})
            raise
        record = {"action": name, "source": source, "done": done}
        self._step_actions.append(record)
        self.emit("env_step", record)
        return observation

    def _respond(self, content: str) -> tuple[str, bool]:
        reply = self._user("user.respond", {"content": content})
        return reply["observation"], bool(reply.get("done"))

    def _user(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        reply = self.link.call(method, payload)
        failed = reply.get("failed") if isinstance(reply, dict) else None
        if failed:
            raise USER_FAILURES.get(str(failed.get("type")), UserSimulatorError)(str(failed.get("message")))
        if not isinstance(reply, dict) or not isinstance(reply.get("observation"), str):
            raise UserSimulatorError(f"the scoring side answered {method} with {str(reply)[:200]}")
        return reply

    def fail(self, reason: str) -> None:
        """End the episode as upstream does when its agent raises (e.g. tool arguments that are not JSON):
        no further step, reward 0, and `reason` recorded as the failure."""
        self.failure = reason
        self.emit("env_failure", {"action": None, "error": reason})

    def is_terminal(self) -> bool:
        return self.failure is not None or (self.episode is not None and self.episode.done)

    def step_summary(self) -> dict[str, Any]:
        """Actions of this step, records written so far, and the database digest after a write."""
        actions, self._step_actions = self._step_actions, []
        episode = self.episode
        if episode is None:
            return {"actions": actions}
        summary: dict[str, Any] = {
            "actions": actions,
            "written": {name: sorted(keys) for name, keys in sorted(episode.db.written().items())},
            "done": episode.done,
        }
        if any(a["action"] != RESPOND_ACTION and not _is_lookup(a["action"]) for a in actions):
            summary["db_digest"] = episode.db.digest()
        if self.failure:
            summary["failure"] = self.failure
        return summary

    def state_digest(self) -> str:
        """Canonical digest of the episode's database (pristine before the reset)."""
        return self.episode.db.digest() if self.episode is not None else self.domain.pristine.digest()

    def final_state(self) -> dict[str, Any]:
        """What the scoring side scores (JSON): the records the episode wrote, and the agent's own account of
        its actions, its end and its messages (reported with the reward, never used to compute it)."""
        episode = self.episode
        return {
            "written": episode.written_records() if episode is not None else {},
            "actions": [action.model_dump() for action in episode.actions] if episode is not None else [],
            "ended_by": episode.ended_by if episode is not None else None,
            "failure": self.failure,
            "traj": deep_copy([*self.transcript[0], *self.transcript[1]]) if self.transcript is not None else None,
        }

    def close(self) -> None:
        """Nothing to release."""

    def release(self) -> None:
        self.episode = None
        self._sink = None


def _is_lookup(name: str) -> bool:
    """Tools that never write the database (by upstream's naming: get_, find_, list_, search_)."""
    return name in ("calculate", "think") or name.startswith(_READ_ONLY_PREFIXES)


def setup_user(ctx: Any, **_: Any) -> None:
    """Kept for older ``--runner`` agents: the simulated user is the benchmark's own, on the scoring side, and
    every agent meets it with no code of its own. Does nothing."""
    return None

"""Scoring side (and :class:`.env.TauEnv`): the step semantics of one Tau-Bench episode, on its own database.

The scoring side runs every action of a split run here (:meth:`.scoring.TauScoring.step`, reached by the
agent side's ``env.step`` calls), so the database, the action log and the end it scores are its own.
Follows upstream tau-bench (spec section 3.2): every action is logged first; ``respond`` goes to the
simulated user and ends the episode when the user says so; a registered tool runs with its exceptions
turned into ``"Error: ..."`` observations; ``transfer_to_human_agents`` ends the episode even when it fails;
anything else is ``"Unknown action <name>"``. No reward here: :mod:`.reward` computes it from the final
database and the action log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from qitos.benchmark.tau_bench.data import RESPOND_ACTION, TERMINATE_TOOLS, Action
from qitos.benchmark.tau_bench.domain import AgentDomain
from qitos.benchmark.tau_bench.errors import InvalidActionError
from qitos.benchmark.tau_bench.state import TauDb, deep_copy
from qitos.benchmark.tau_bench.tools import call_tool, domain_tools

# the user's reply to a respond: (observation, does it end the episode)
Respond = Callable[[Any], "tuple[str, bool]"]


class TauEpisode:
    """The database and action log of one episode, and how an action changes them."""

    def __init__(self, domain: AgentDomain) -> None:
        self.domain = domain
        self._tools = domain_tools(domain.name)
        self.db = TauDb(domain.pristine)
        self.actions: list[Action] = []
        self.done = False
        self.ended_by: str | None = None  # "user" (it said so) or the terminating tool

    def apply(self, action_name: Any, kwargs: Mapping[str, Any] | None, respond: Respond) -> tuple[str, str, bool]:
        """One action: (observation, source, done). Steps after the end are allowed (as upstream)."""
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
            observation, done = respond(respond_content(kwargs))
            source = "user"
        elif action_name in self._tools:
            observation = call_tool(self.domain.name, self._tools[action_name], self.db, deep_copy(dict(kwargs)))
            source, done = action_name, action_name in TERMINATE_TOOLS
        else:
            observation, source, done = f"Unknown action {action_name}", action_name, False
        if done and not self.done:
            self.done, self.ended_by = True, source
        return observation, source, done

    def written_records(self) -> dict[str, dict[str, Any]]:
        """The records this episode wrote or inserted, per collection (the rest is the pristine database)."""
        return {name: {key: deep_copy(self.db[name][key]) for key in sorted(keys)}
                for name, keys in sorted(self.db.written().items())}


def respond_content(kwargs: Mapping[str, Any]) -> Any:
    """The content said to the user, of any JSON type: upstream sends None (a reply with no text and no tool
    call) or a list to the user as it is, and fails only when its outputs check reaches it."""
    if "content" not in kwargs:
        raise InvalidActionError("respond needs a 'content' argument (the message to the user)")
    return deep_copy(kwargs["content"])

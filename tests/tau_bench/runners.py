"""Agents for `qit bench run --benchmark tau-bench --runner tests.tau_bench.runners:<name>` in the tests."""

from __future__ import annotations

from qitos.core import AgentModule, Decision


class _SayHi(AgentModule):
    """The README's null agent: one message "Hi" to the user, then stop (no model call)."""

    name = "tau-null-agent"

    def __init__(self, env) -> None:
        super().__init__(tools=env.registry(with_respond=True))

    def decide(self, task, state):
        if state.scratch.get("said"):
            return Decision.final("")
        state.scratch["said"] = True
        return Decision.act("respond", {"content": "Hi"})


def say_hi(ctx) -> AgentModule:
    return _SayHi(ctx.runtime.env)  # the simulated user is the benchmark's: no code here sets it up

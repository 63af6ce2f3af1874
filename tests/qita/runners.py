"""Agents for `qit bench run --runner tests.qita.runners:<name>` in the board tests."""

from __future__ import annotations

from qitos.core import AgentModule, Decision


class _HalfOracle(AgentModule):
    """Answers tasks with an even number in their id correctly and the others wrongly (no model call)."""

    name = "half-oracle-test"

    def __init__(self, answer: str, right: bool) -> None:
        super().__init__()
        self.answer, self.right = answer, right

    def decide(self, task, state):
        return Decision.final(self.answer if self.right else "certainly not " + self.answer)


def half_oracle(ctx) -> AgentModule:
    digits = "".join(ch for ch in ctx.task.id if ch.isdigit()) or "0"
    return _HalfOracle(str(ctx.oracle_gold()), int(digits) % 2 == 0)


half_oracle.needs_model = False

"""Agents plugged into `qit bench run --runner tests.support.runners:<name>` by the platform tests."""

from __future__ import annotations

import os
import time

from qitos.core import AgentModule, Decision, tool
from qitos.recipes.qa import build_qa_agent


class _Oracle(AgentModule):
    """Answers each task with its reference answer, after an optional pause (no model call)."""

    name = "oracle-test"

    def __init__(self, answer, delay: float, fail: bool) -> None:
        super().__init__()
        self.answer, self.delay, self.fail = answer, delay, fail

    def decide(self, task, state):
        if self.fail:
            raise RuntimeError(f"runner crashed on {task.id}")
        time.sleep(self.delay)
        return Decision.final(str(self.answer))


def _gold(ctx):
    """The reference answer, through the one oracle channel (which makes these runs non-official)."""
    try:
        return ctx.oracle_gold()
    except LookupError:
        return None


def oracle(ctx) -> AgentModule:
    """Instant oracle; tasks whose id contains 'crash' raise inside the agent."""
    return _Oracle(_gold(ctx), float(os.environ.get("QITOS_TEST_DELAY", "0")), "crash" in ctx.task.id)


oracle.needs_model = False


class _SlowOracle(AgentModule):
    """Three steps: two pauses through a tool (so Ctrl-C lands between steps), then the answer."""

    name = "slow-oracle-test"

    def __init__(self, answer, delay: float) -> None:
        @tool
        def pause(seconds: float) -> str:
            """Wait a little."""
            time.sleep(seconds)
            return "paused"

        super().__init__(tools=[pause])
        self.answer, self.delay = answer, delay

    def decide(self, task, state):
        state.scratch["n"] = state.scratch.get("n", 0) + 1
        if state.scratch["n"] <= 2:
            return Decision.act("pause", {"seconds": self.delay / 2})
        return Decision.final(str(self.answer))


def slow_oracle(ctx) -> AgentModule:
    return _SlowOracle(_gold(ctx), float(os.environ.get("QITOS_TEST_DELAY", "0.4")))


slow_oracle.needs_model = False


def slow_agent(ctx) -> AgentModule:
    """slow_oracle's three steps with one-second pauses and no gold: it runs on the agent side, where the
    environment (QITOS_TEST_DELAY) and gold are not."""
    return _SlowOracle(None, 1.0)


slow_agent.needs_model = False


def qa(ctx) -> AgentModule:
    """The built-in QA recipe (uses the model), for replay tests."""
    return build_qa_agent(ctx)

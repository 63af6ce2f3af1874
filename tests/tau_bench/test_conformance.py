"""Every conformance fixture case (generated with upstream tau-bench) replays identically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qitos.benchmark.tau_bench import DomainData, InvalidObservationError

from .conftest import stop_env

# Exception types named in the fixtures -> the exception our env raises in that situation.
RAISES = {"ValidationError": InvalidObservationError}


def test_conformance_case(
    conformance_case: dict[str, Any] | None, tau_data: Path, domains: dict[str, DomainData]
) -> None:
    case = conformance_case
    assert case is not None
    env = stop_env(domains[case["domain"]], case["task_index"], case["split"])
    done_after = reward = None
    for index, (action, expected) in enumerate(zip(case["actions"], case["observations"], strict=True)):
        where = f"action {index} {action['name']}({action['kwargs']})"
        if isinstance(expected, dict):
            with pytest.raises(RAISES[expected["raises"]]):
                env.step(action["name"], action["kwargs"])
            continue
        result = env.step(action["name"], action["kwargs"])
        assert result.observation == expected, where
        if result.done:
            done_after, reward = index, result.reward
            break
    assert done_after == case["done_after"]
    assert reward == case["reward"]
    if done_after is not None:
        assert len(case["actions"]) == done_after + 1  # a case never continues past done
        assert env.reward_result is not None
        assert env.reward_result.final_state_digest == case["final_state_digest"]
    # Our reward leaves the agent's state in place, so the env's digest matches even after done.
    assert env.state_digest() == case["final_state_digest"]

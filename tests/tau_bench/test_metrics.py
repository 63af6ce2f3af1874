"""Tau-Bench metrics: average reward and pass^k (upstream's pass-hat-k), overall and per domain."""

from __future__ import annotations

import math

import pytest

from qitos.benchmark.tau_bench.adapter import TauBenchAdapter
from qitos.benchmark.tau_bench.metrics import tau_metrics


def row(task: str, trial: int, reward: float | None, subset: str = "retail", **extra) -> dict:
    metadata = {} if reward is None else {"reward": reward}
    return {"task_id": task, "trial": trial, "subset": subset, "benchmark": "tau-bench", "metadata": metadata,
            "score": reward, **extra}


def test_pass_hat_k_matches_upstream_formula() -> None:
    # task a: 3 of 4 trials pass; task b: 1 of 4; task c: 4 of 4
    rows = [row("a", t, r) for t, r in enumerate([1.0, 1.0, 0.0, 1.0])]
    rows += [row("b", t, r) for t, r in enumerate([0.0, 0.0, 1.0, 0.0])]
    rows += [row("c", t, 1.0) for t in range(4)]
    metrics = tau_metrics(rows)
    for k in range(1, 5):
        expected = (math.comb(3, k) + math.comb(1, k) + math.comb(4, k)) / math.comb(4, k) / 3
        assert metrics[f"pass^{k}"] == pytest.approx(expected)
    assert metrics["average_reward"] == pytest.approx(8 / 12)
    assert metrics["tasks"] == 3 and metrics["trials"] == 4 and metrics["domains"] == "retail"
    assert "pass^5" not in metrics


def test_errors_score_zero_and_near_one_counts_as_pass() -> None:
    rows = [row("a", 0, 1.0 - 1e-9), row("a", 1, None, stop_reason="error"), row("b", 0, 0.0), row("b", 1, 1.0)]
    metrics = tau_metrics(rows)
    assert metrics["pass^1"] == pytest.approx(0.5) and metrics["pass^2"] == 0.0
    assert metrics["average_reward"] == pytest.approx((1.0 - 1e-9 + 1.0) / 4)


def test_per_domain_figures_when_rows_span_domains() -> None:
    rows = [row("tau_retail_test_00000", 0, 1.0), row("tau_retail_test_00001", 0, 0.0),
            row("tau_airline_test_00000", 0, 1.0, subset="airline")]
    metrics = TauBenchAdapter().metrics(rows)
    assert metrics["domains"] == "airline, retail"
    assert metrics["retail average_reward"] == 0.5 and metrics["airline pass^1"] == 1.0
    assert metrics["pass^1"] == pytest.approx(2 / 3)


def test_no_rows_no_metrics() -> None:
    assert tau_metrics([]) == {}

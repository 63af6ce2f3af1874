"""Tau-Bench metrics: average reward and pass^k (upstream's pass-hat-k), overall and per domain; upstream's own
figures checked against upstream run.py's display_metrics on the same rewards."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from qitos.benchmark.tau_bench.adapter import TauBenchAdapter
from qitos.benchmark.tau_bench.metrics import row_reward, tau_metrics

from .upstream_harness import upstream_display_metrics


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


def upstream_display(tau_data: Path, rows: list[dict]) -> dict[str, float]:
    results = [{"task_id": int(r["task_id"].rsplit("_", 1)[1]), "reward": row_reward(r), "trial": r["trial"]}
               for r in rows]
    return upstream_display_metrics(tau_data / "upstream", results)


@pytest.mark.parametrize("seed", range(12))
def test_upstream_figures_are_upstreams_display_metrics(tau_data: Path, seed: int) -> None:
    """The same rewards through upstream's display_metrics and through `upstream_metrics`: the same figures."""
    rng = random.Random(seed)
    tasks, trials = rng.randint(1, 9), rng.randint(1, 5)
    rewards = (0.0, 1.0, 1.0, 1.0 - 1e-7, 1.0 + 1e-7, 1.0 - 1e-5, 0.5)
    rows = [row(f"tau_retail_test_{t:05d}", trial, rng.choice(rewards)) for trial in range(trials) for t in range(tasks)]
    if seed % 3 == 0 and len(rows) > 1:  # an incomplete run: upstream counts only the rows there are
        del rows[rng.randrange(len(rows))]
    rng.shuffle(rows)
    expected = upstream_display(tau_data, rows)
    assert len(expected) == 1 + len({r["trial"] for r in rows})
    ours = {k: v for k, v in tau_metrics(rows).items() if k.startswith("upstream_")}
    assert ours == expected


def test_upstream_figures_differ_from_qitos_only_on_missing_rows() -> None:
    rows = [row("a", 0, 1.0), row("a", 1, 1.0), row("b", 0, 1.0), {"task_id": "b", "trial": 1, "selected_tasks": 2}]
    complete = tau_metrics(rows)
    assert complete["average_reward"] == complete["upstream_average_reward"] == 0.75
    assert complete["pass^2"] == complete["upstream_pass^2"] == 0.5
    partial = tau_metrics(rows[:3])  # b's second trial has no row: QitOS counts it failed, upstream never sees it
    assert partial["upstream_average_reward"] == 1.0 and partial["upstream_pass^2"] == 0.5
    assert partial["average_reward"] == 0.75

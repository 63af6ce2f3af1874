"""Paired comparison statistics: McNemar (exact and chi-square) and Newcombe's paired interval."""

from __future__ import annotations

import math

import pytest

from qitos.qita.paired import compare_paired, mcnemar, paired_difference_ci


def test_mcnemar_exact_for_small_discordant_counts():
    assert mcnemar(3, 0) == (pytest.approx(0.25), "exact binomial")  # 2 * (1/2)^3
    assert mcnemar(5, 1)[0] == pytest.approx(2 * (1 + 6) / 64)  # 2 * P(X <= 1), X ~ Bin(6, 1/2)
    assert mcnemar(4, 4)[0] == 1.0
    assert mcnemar(0, 0) == (1.0, "no discordant pairs")


def test_mcnemar_chi_square_for_large_counts():
    p, method = mcnemar(30, 10)
    assert method.startswith("chi-square")
    stat = (abs(30 - 10) - 1) ** 2 / 40  # 9.025
    assert p == pytest.approx(math.erfc(math.sqrt(stat / 2))) and 0.0026 < p < 0.0027
    # the exact test and the chi-square test agree closely just above the switch
    exact = 2 * sum(math.comb(30, i) for i in range(10)) / 2**30  # P(X <= 9), X ~ Bin(30, 1/2)
    assert mcnemar(21, 9)[0] == pytest.approx(exact, rel=0.25)


def test_newcombe_interval_properties():
    low, high = paired_difference_ci(both=3, only_a=3, only_b=0, neither=0)
    assert low <= 0.5 <= high and -1 <= low and high <= 1
    swapped = paired_difference_ci(both=3, only_a=0, only_b=3, neither=0)
    assert swapped == (pytest.approx(-high), pytest.approx(-low))
    assert paired_difference_ci(0, 0, 0, 0) is None
    small = paired_difference_ci(20, 6, 2, 12)
    large = paired_difference_ci(2000, 600, 200, 1200)
    assert (large[1] - large[0]) < (small[1] - small[0])
    # for large n it approaches the Wald interval of paired proportions
    n, b, c = 4000, 600, 200
    d = (b - c) / n
    se = math.sqrt((b + c) - (b - c) ** 2 / n) / n
    assert large[0] == pytest.approx(d - 1.96 * se, abs=0.005) and large[1] == pytest.approx(d + 1.96 * se, abs=0.005)


def row(task, success, trial=0, run=None):
    return {"task_id": task, "trial": trial, "success": success, "trace_run_dir": run}


def test_compare_paired_pairs_shared_keys_only():
    a = [row("t1", True), row("t2", True), row("t3", False), row("t4", True), row("only-a", True), row("unscored", None)]
    b = [row("t1", True), row("t2", False), row("t3", True), row("t4", False), row("only-b", False), row("unscored", True)]
    result = compare_paired(a, b)
    assert result.unit == "task" and len(result.pairs) == 4
    assert result.counts == {"both": 1, "only_a": 2, "only_b": 1, "neither": 0}
    assert result.rate_a == 0.75 and result.rate_b == 0.5 and result.difference == -0.25  # B − A
    low, high = result.ci95
    assert low < -0.25 < high  # the interval of B − A: A's Newcombe interval mirrored
    assert result.tasks_only_in_a == 1 and result.tasks_only_in_b == 2  # "unscored" has no score in A
    assert result.test == "exact binomial" and result.p_value == pytest.approx(1.0)
    trials = compare_paired([row("t", True, 0), row("t", False, 1)], [row("t", True, 0), row("t", True, 1)])
    assert trials.unit == "task × trial" and trials.counts["only_b"] == 1 and trials.shared_tasks == 1

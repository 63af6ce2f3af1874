"""Scoring side: GAIA's do-nothing floor: does an agent that answers nothing match the ground truth?

GAIA's official scorer casts a missing answer to text and compares it with the ground truth (`scorer.py`).
Asking that scorer about an empty answer decides the floor exactly: it is 0 for any real label, except in the
scorer's odd corner where a ground truth of "inf" matches any unparseable prediction. Unlabeled (test)
tasks have no floor.
"""

from __future__ import annotations

from typing import Any

from qitos.benchmark.gaia.scorer import score_answer


def do_nothing_success(truth: Any) -> bool | None:
    return None if truth is None else score_answer(None, truth)

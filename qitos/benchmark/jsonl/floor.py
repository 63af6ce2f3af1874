"""Scoring side: the jsonl family's do-nothing floor: does no answer pass the run's scorer?

A task is scored by the chosen scorer (`--option scorer=NAME`, `qitos/benchmark/scorers.py`) against the
row's answer; an agent that does nothing gives no answer. Asking the scorer decides it: `exact`,
`normalized`, `contains` and `numeric` never pass a missing answer; `gaia` compares it as empty text.
Unlabeled rows have no floor.
"""

from __future__ import annotations

from typing import Any

from qitos.benchmark.scorers import get_scorer


def do_nothing_success(scorer: str, answer: Any) -> bool | None:
    return None if answer is None else bool(get_scorer(scorer)(None, answer))

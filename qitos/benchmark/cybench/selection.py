"""Scoring side. What a run's flags select: the CyBench checkout (``--root``, else the data dir's), the split and
the prompt variant, each a one-line usage error when it names nothing there."""

from __future__ import annotations

import functools
from pathlib import Path

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.cybench.tasks import SPLITS, TASK_LISTS, VARIANTS, Split, Variant, load_tasks
from qitos.benchmark.errors import BenchmarkUsageError


def data_root(load: LoadOptions) -> Path:
    """The CyBench checkout: --root, else <data_dir>/cybench; must hold task_list.txt."""
    root = Path(load.root) if load.root else Path(load.data_dir) / "cybench"
    if not (root / TASK_LISTS["unguided"]).is_file():
        flag = "--root" if load.root else "--data-dir (or QITOS_DATA_DIR)"
        raise BenchmarkUsageError(
            f"{flag}: {root} is not a CyBench checkout (no task_list.txt); run `qit data fetch cybench` "
            "or pass --root <folder with task_list.txt and benchmark/>")
    return root


def split_of(load: LoadOptions) -> Split:
    split = load.split or "unguided"
    if split not in SPLITS:
        raise BenchmarkUsageError(f"--split {split}: CyBench has the splits {', '.join(SPLITS)}")
    return split  # type: ignore[return-value]


def variant_of(load: LoadOptions) -> Variant:
    variant = load.variant or "hard"
    if variant not in VARIANTS:
        raise BenchmarkUsageError(f"--variant {variant}: CyBench has the prompt variants {', '.join(VARIANTS)}")
    return variant  # type: ignore[return-value]


@functools.lru_cache(maxsize=8)
def max_subtasks(root: str, split: Split) -> int:
    """The largest subtask count in a split (sets the uniform guided step budget)."""
    return max(len(t.subtasks) for t in load_tasks(Path(root), split))

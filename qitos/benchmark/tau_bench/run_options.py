"""Scoring side: upstream run.py's options that change what is measured: task range, shuffle, seed, few-shot count.

``--option start_index=N end_index=M`` select tasks [N, M) of the split (end -1: to the end), as
upstream's ``--start-index``/``--end-index``. Upstream seeds Python's global random generator with
``--seed`` (default 10; here ``--option run_seed``), draws once when it builds its first env, then
for each trial shuffles the task order (``--option shuffle=1``) and, for the few-shot agent, draws
``num_few_shots`` examples per task in that order. :func:`few_shot_sample` replays that stream, so
each task × trial gets upstream's examples whatever order QitOS runs the tasks in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from qitos.benchmark.options import resolve_options
from qitos.benchmark.tau_bench.options import NUM_FEW_SHOTS, RUN_SEED, TauOptions


@dataclass(frozen=True)
class RunOptions:
    start_index: int = 0
    end_index: int = -1
    shuffle: bool = False
    run_seed: int = RUN_SEED
    num_few_shots: int = NUM_FEW_SHOTS

    def indices(self, task_count: int) -> list[int]:
        """Upstream's ``range(start_index, end_index)`` over a split of `task_count` tasks."""
        end = task_count if self.end_index == -1 else min(self.end_index, task_count)
        return list(range(self.start_index, end))


def run_options(options: dict[str, Any]) -> RunOptions:
    """Upstream's run options out of the run's options (declared and checked in :mod:`.options`)."""
    values = resolve_options(TauOptions, options, "tau-bench")
    return RunOptions(**{key: values[key] for key in ("start_index", "end_index", "shuffle", "run_seed",
                                                      "num_few_shots")})


def few_shot_sample(opts: RunOptions, task_count: int, display_count: int, trial: int, task_index: int) -> list[int]:
    """Indices (into the few-shot file's lines) that upstream's run samples for this task and trial."""
    if display_count < opts.num_few_shots:
        raise ValueError(f"--option num_few_shots={opts.num_few_shots}: the few-shot file has only "
                         f"{display_count} examples")
    schedule = _schedule(opts, task_count, display_count, trial)
    if task_index not in schedule[trial]:
        raise ValueError(f"task {task_index} is outside --option start_index/end_index")
    return schedule[trial][task_index]


@lru_cache(maxsize=32)
def _schedule(opts: RunOptions, task_count: int, display_count: int, last_trial: int) -> list[dict[int, list[int]]]:
    rng = random.Random(opts.run_seed)
    rng.randint(0, task_count)  # upstream's first get_env(), built without a task index
    trials = []
    for _ in range(last_trial + 1):
        order = opts.indices(task_count)
        if opts.shuffle:
            rng.shuffle(order)
        trials.append({index: rng.sample(range(display_count), opts.num_few_shots) for index in order})
    return trials

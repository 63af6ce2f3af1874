"""Scoring side: Tau-Bench's do-nothing floor: does an agent that ends at once score 1 on a task?

Upstream's reward (``Env.calculate_reward`` in tau_bench/envs/base.py) is 1 when the final database hashes
as the gold replay's does and, for a task with outputs, every output is in some message said to the user.
An agent that does nothing leaves the database pristine and says nothing, so it scores 1 exactly on the
tasks whose gold replay leaves the database as it was (no write, or only writes that fail) and that ask for
no output. Rather than restate that rule, this asks QitOS's reward (``reward.compute_reward``, upstream's
decision, checked by the conformance fixtures) to score such an episode: the floor cannot drift from the
scorer. Cached per task: the gold replay is cached already, the pristine hash is computed once per task.
"""

from __future__ import annotations

import threading
import weakref

from qitos.benchmark.tau_bench.data import DomainData
from qitos.benchmark.tau_bench.reward import compute_reward
from qitos.benchmark.tau_bench.state import TauDb

# per loaded domain (a reloaded one, e.g. after `data.clear_cache()`, is computed afresh), then (split, task index)
_CACHE: "weakref.WeakKeyDictionary[DomainData, dict[tuple[str, int], bool]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def do_nothing_success(data: DomainData, split: str, task_index: int) -> bool:
    """Reward 1 for an episode with no action and nothing said: the pristine database, no respond."""
    key = (split, task_index)
    with _LOCK:
        cached = _CACHE.setdefault(data, {}).get(key)
    if cached is None:
        outcome = compute_reward(data, split, task_index, TauDb(data.pristine), actions=[], said=[])
        cached = outcome.reward == 1.0
        with _LOCK:
            _CACHE[data][key] = cached
    return cached

"""Tau-Bench environment speed: reset + reward per task, the gold oracle, and a naive baseline.

Usage: python benchmarks/tau_bench_env.py [--data-dir $QITOS_DATA_DIR/tau-bench] [--naive-sample 60]

* reset + reward: for every task of every split (685), time env construction + reset, play the
  gold calls untimed, then time the final step that ends the episode (which computes the
  reward). "cold" is the first episode of a task in the process (includes the one-off gold
  replay), "warm" a repeat (pass^k runs). Target: median <= 20 ms.
* gold oracle: wall time of all 685 gold episodes from a cold start (domain loading included).
  Target: < 60 s on 2 cores.
* gold oracle through `qit bench`: the same 685 tasks through the real benchmark path (adapter,
  oracle recipe, Engine with traces written and fsynced, evaluation, results file), 2 workers.
  Target: < 60 s on 2 cores.
* naive baseline: upstream's strategy on a sample of tasks: re-parse the JSON database on reset,
  and for the reward re-parse again, replay the gold calls, and hash both databases in full.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from qitos.benchmark.tau_bench import DomainData, ScriptedUser, TauEnv, clear_cache, load_domain, upstream_data_hash
from qitos.benchmark.tau_bench.data import DOMAIN_COLLECTIONS, DOMAIN_SPLITS, TERMINATE_TOOLS
from qitos.benchmark.tau_bench.tools import call_tool, domain_tools


class PlainDb:
    """Upstream's database: a plain dict mutated in place (what the naive baseline works on)."""

    def __init__(self, collections: dict[str, dict[str, Any]]) -> None:
        self.collections = collections

    def __getitem__(self, name: str) -> dict[str, Any]:
        return self.collections[name]

    def writable(self, name: str, key: Any) -> Any:
        return self.collections[name][key]

    def insert(self, name: str, key: str, record: Any) -> None:
        self.collections[name][key] = record


def all_tasks(domains: list[DomainData]) -> list[tuple[DomainData, str, int]]:
    return [(d, split, i) for d in domains for split in DOMAIN_SPLITS[d.name] for i in range(len(d.split_tasks(split)))]


def final_action(domain: DomainData, split: str, index: int) -> tuple[list[Any], tuple[str, dict[str, Any]]]:
    """The gold calls before the end, and the action that ends the episode."""
    task = domain.task(split, index)
    actions = [(a.name, a.kwargs) for a in task.actions]
    if actions and actions[-1][0] in TERMINATE_TOOLS:
        return actions[:-1], actions[-1]
    content = " and ".join(task.outputs) if task.outputs else "Done."
    return actions, ("respond", {"content": content})


def episode(domain: DomainData, split: str, index: int) -> tuple[float, float, float]:
    """(seconds in construct + reset, seconds in the ending step with the reward, reward)."""
    before, (name, kwargs) = final_action(domain, split, index)
    start = time.perf_counter()
    env = TauEnv(domain, index, split, user=ScriptedUser(["hello"]))
    env.reset()
    reset_seconds = time.perf_counter() - start
    for action_name, action_kwargs in before:
        env.step(action_name, action_kwargs)
    start = time.perf_counter()
    result = env.step(name, kwargs)
    return reset_seconds, time.perf_counter() - start, float(result.reward or 0.0)


def naive_episode(domain: DomainData, split: str, index: int) -> tuple[float, float]:
    """Seconds for upstream-style reset and reward (JSON re-parse, full replay, full hashes)."""

    def load() -> PlainDb:
        folder = domain.root / domain.name / "db"
        names = DOMAIN_COLLECTIONS[domain.name]
        return PlainDb({name: json.loads((folder / f"{name}.json").read_text()) for name in names})

    tools = domain_tools(domain.name)
    before, _ = final_action(domain, split, index)
    start = time.perf_counter()
    db = load()
    reset_seconds = time.perf_counter() - start
    for name, kwargs in before:
        if name in tools:
            call_tool(domain.name, tools[name], db, json.loads(json.dumps(kwargs)))
    start = time.perf_counter()
    agent_hash = upstream_data_hash(db.collections)
    gold = load()
    for action in domain.task(split, index).actions:
        if action.name in tools and action.name not in TERMINATE_TOOLS:
            call_tool(domain.name, tools[action.name], gold, json.loads(json.dumps(action.kwargs)))
    _ = agent_hash == upstream_data_hash(gold.collections)
    return reset_seconds, time.perf_counter() - start


def oracle_via_bench(data_dir: Path, workers: int = 2) -> tuple[int, int, float]:
    """(tasks scored 1.0, tasks run, wall seconds) of the oracle recipe over every split via `qit bench`."""
    from qitos.benchmark.base import LoadOptions
    from qitos.run.config import RunConfig
    from qitos.run.runner import execute_batch, plan_batch

    passed = total = 0
    clear_cache()  # a cold start, like the first figure: domain loading included
    with tempfile.TemporaryDirectory(prefix="tau-oracle-") as tmp:
        start = time.perf_counter()
        for domain in ("retail", "airline"):
            for split in DOMAIN_SPLITS[domain]:
                out = Path(tmp) / f"{domain}_{split}"
                load = LoadOptions(root=data_dir, subset=domain, split=split)
                cfg = RunConfig(benchmark="tau-bench", load=load, recipe="oracle", concurrency=workers,
                                trace_logdir=out / "runs", output=out / "results.jsonl")
                rows = execute_batch(plan_batch(cfg)).rows
                passed += sum(1 for row in rows if row.success)
                total += len(rows)
        return passed, total, time.perf_counter() - start


def summary(label: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    median = statistics.median(ordered)
    return f"{label:<34} median {median * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   (n={len(ordered)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = Path(os.environ.get("QITOS_DATA_DIR", Path.home() / ".cache" / "qitos" / "data")) / "tau-bench"
    parser.add_argument("--data-dir", type=Path, default=default_dir)
    parser.add_argument("--naive-sample", type=int, default=60, help="tasks timed with the naive baseline")
    args = parser.parse_args()
    if not (args.data_dir / "retail").is_dir():
        print(f"tau-bench data not found at {args.data_dir} (set QITOS_DATA_DIR or --data-dir)", file=sys.stderr)
        return 2

    clear_cache()
    start = time.perf_counter()
    domains = [load_domain(args.data_dir, "retail"), load_domain(args.data_dir, "airline")]
    tasks = all_tasks(domains)
    cold_runs = [episode(domain, split, index) for domain, split, index in tasks]
    oracle_wall = time.perf_counter() - start
    warm_runs = [episode(domain, split, index) for domain, split, index in tasks]
    cold = [reset + reward for reset, reward, _ in cold_runs]
    warm = [reset + reward for reset, reward, _ in warm_runs]
    rewards = [reward for _, _, reward in cold_runs]

    bench_passed, bench_total, bench_wall = oracle_via_bench(args.data_dir)

    step = max(1, len(tasks) // max(1, args.naive_sample))
    sample = tasks[::step][: args.naive_sample]
    gc.collect()
    gc.freeze()  # keep the cyclic GC from re-scanning the long-lived pristine data (fair to the baseline)
    naive_runs = [naive_episode(domain, split, index) for domain, split, index in sample]
    fast_runs = [episode(domain, split, index) for domain, split, index in sample]

    print(f"tau-bench env benchmark over {len(tasks)} tasks ({args.data_dir})")
    print(f"gold oracle: {sum(r == 1.0 for r in rewards)}/{len(tasks)} reward 1.0, wall {oracle_wall:.2f} s "
          "(cold start, domain loading included; target < 60 s)")  # fmt: skip
    print(f"gold oracle via qit bench (adapter + job, traces fsynced, 2 workers, cold start): "
          f"{bench_passed}/{bench_total} reward 1.0, wall {bench_wall:.2f} s (target < 60 s)")
    print(summary("reset + reward, cold (first run)", cold))
    print(summary("reset + reward, warm (repeat run)", warm))
    for name in ("retail", "airline"):
        picked = [t for t, (d, _, _) in zip(warm, tasks, strict=True) if d.name == name]
        print(summary(f"  warm, {name} only", picked))
    print(summary("reset only, warm", [reset for reset, _, _ in warm_runs]))
    naive_reset = [reset for reset, _ in naive_runs]
    naive_total = [reset + reward for reset, reward in naive_runs]
    fast_reset = [reset for reset, _, _ in fast_runs]
    fast_total = [reset + reward for reset, reward, _ in fast_runs]
    print(f"naive baseline on {len(sample)} sampled tasks (same run):")
    print(summary("  naive reset (JSON re-parse)", naive_reset))
    print(summary("  ours reset", fast_reset))
    print(summary("  naive reset + reward", naive_total))
    print(summary("  ours reset + reward", fast_total))
    print(f"speed-up (ratio of medians): reset {statistics.median(naive_reset) / statistics.median(fast_reset):.0f}x, "
          f"reset + reward {statistics.median(naive_total) / statistics.median(fast_total):.0f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

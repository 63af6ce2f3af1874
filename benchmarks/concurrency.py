"""Does a higher `--concurrency` ever make the default command slower than the default concurrency?

Issue 34's line: `--concurrency` higher than the default must never be slower than the default, at any model
latency. Workload: the harness benchmark's (`harness_overhead.py`: model call → tool → model call with the
answer), through `qit bench`'s runner with every other setting at its default (`--workers auto`), against the
local OpenAI-compatible server at several latencies. Each concurrency runs `--repeats` times, interleaved (this
machine is noisy); the median wall time of each is shown, and its ratio to the default's (target <= 1.0).

Run: .venv/bin/python benchmarks/concurrency.py [--quick] [--repeats 3] [--concurrency 16,64]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness_overhead import Server, drive  # noqa: E402  (the same workload server and driver)

from qitos.cli.bench_run import DEFAULT_CONCURRENCY  # noqa: E402  (`qit bench run`'s own default)


def scenario(latency: float, samples: int, levels: list[int], repeats: int, workdir: Path) -> dict[int, float]:
    """Median wall seconds per concurrency level, the levels interleaved and their order reversed every repeat."""
    runs: dict[int, list[float]] = {level: [] for level in levels}
    server = Server(latency)
    try:
        for repeat in range(repeats):
            for level in (levels if repeat % 2 == 0 else list(reversed(levels))):
                result = drive(Path(sys.executable), "qitos_driver.py", server.base_url, samples, level, workdir)
                if result["successes"] != samples:
                    raise RuntimeError(f"concurrency {level}: {result['successes']}/{samples} correct")
                runs[level].append(result["seconds"])
    finally:
        server.close()
    return {level: sorted(seconds)[len(seconds) // 2] for level, seconds in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer tasks and one repeat, for a fast look")
    parser.add_argument("--repeats", type=int, default=3, help="runs per level and latency; the median is shown")
    parser.add_argument("--concurrency", default="16,64", help="levels compared with the default (comma-separated)")
    args = parser.parse_args()
    try:
        higher = [int(level) for level in args.concurrency.split(",")]
    except ValueError:
        parser.error(f"--concurrency: {args.concurrency!r} is not a comma-separated list of numbers (e.g. 16,64)")
    levels = [DEFAULT_CONCURRENCY, *(level for level in higher if level != DEFAULT_CONCURRENCY)]
    repeats = 1 if args.quick else args.repeats
    # latency (s) -> tasks: enough for every level to reach its steady state in a few seconds
    workloads = {0.0: 128, 0.02: 128, 0.2: 128} if args.quick else {0.0: 512, 0.02: 512, 0.2: 128}
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="qitos-concurrency-") as tmp:
        for latency, samples in workloads.items():
            medians = scenario(latency, samples, levels, repeats, Path(tmp))
            base = medians[DEFAULT_CONCURRENCY]
            print(f"== {latency * 1000:.0f} ms latency, N={samples} (median of {repeats})")
            for level, seconds in medians.items():
                ratio = seconds / base
                if level != DEFAULT_CONCURRENCY:
                    worst = max(worst, ratio)
                label = " (default)" if level == DEFAULT_CONCURRENCY else f" = {ratio:.3f} x the default"
                print(f"  --concurrency {level:<3}: {seconds:.2f} s{label}")
    print(f"worst ratio of a higher --concurrency to the default: {worst:.3f} (target <= 1.0)")


if __name__ == "__main__":
    main()

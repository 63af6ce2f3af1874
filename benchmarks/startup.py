"""`qit --help` wall time against `python -c pass` (target: at most 0.4 s more).

Run: .venv/bin/python benchmarks/startup.py [--repeats 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def wall(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    base, qit, qita = [], [], []
    for _ in range(args.repeats):
        base.append(wall([sys.executable, "-c", "pass"]))
        qit.append(wall([sys.executable, "-m", "qitos.cli.qit", "--help"]))
        qita.append(wall([sys.executable, "-m", "qitos.cli.qita", "--help"]))
    b, q, a = (statistics.median(x) for x in (base, qit, qita))
    print(f"python -c pass : {b * 1000:.0f} ms")
    print(f"qit --help     : {q * 1000:.0f} ms  (+{(q - b) * 1000:.0f} ms; target <= +400 ms)")
    print(f"qita --help    : {a * 1000:.0f} ms  (+{(a - b) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()

"""Compare two results files task by task: `python examples/compare_results.py A.jsonl B.jsonl`.

Prints each file's success rate with its 95% interval and the tasks only one of them solved.
`qita diff A B` and the board's Experiment page do the same with paired statistics.
"""

from __future__ import annotations

import sys
from pathlib import Path

from qitos.benchmark.metrics import dedupe, summarize
from qitos.results.rows import iter_rows


def solved(rows: list[dict]) -> dict[str, bool]:
    """Task id → solved in every trial."""
    out: dict[str, bool] = {}
    for row in rows:
        if row.get("success") is None:
            continue
        out[row["task_id"]] = out.get(row["task_id"], True) and bool(row["success"])
    return out


def main(a: str, b: str) -> None:
    rows_a, rows_b = dedupe(iter_rows(Path(a))), dedupe(iter_rows(Path(b)))
    for name, rows in ((a, rows_a), (b, rows_b)):
        m = summarize(rows)
        low, high = m["success_ci95"] or (0.0, 0.0)
        print(f"{name}: {m['successes']}/{m['scored']} solved, rate {m['success_rate'] or 0:.3f} [{low:.3f}, {high:.3f}]")
    sa, sb = solved(rows_a), solved(rows_b)
    shared = sorted(set(sa) & set(sb))
    only_a = [t for t in shared if sa[t] and not sb[t]]
    only_b = [t for t in shared if sb[t] and not sa[t]]
    print(f"shared tasks: {len(shared)}; only {a}: {len(only_a)}; only {b}: {len(only_b)}")
    for t in only_a:
        print(f"  only A: {t}")
    for t in only_b:
        print(f"  only B: {t}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python examples/compare_results.py A.jsonl B.jsonl")
    main(sys.argv[1], sys.argv[2])

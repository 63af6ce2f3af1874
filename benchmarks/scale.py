"""How `qit bench run` scales with the number of tasks: ms per task and peak memory of the whole process tree.

Workload: the harness benchmark's jsonl tasks (model call → tool → model call with the answer) against a
zero-latency OpenAI-compatible server on loopback, run through the CLI exactly as a user would
(`qit bench run --benchmark jsonl --runner ...`, default flags otherwise). The whole tree (qit, its workers,
the confined agent processes) is sampled from /proc every 50 ms; the peak of the summed RSS is printed.

Run: .venv/bin/python benchmarks/scale.py [--sizes 1000,10000] [--huge] [--concurrency N]   (--huge adds N = 100,000)
Target (issue 34): at most 6 ms per task at N = 10,000, and peak RSS within 20 % of the N = 1,000 figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness_overhead import HARNESS_NICENESS, Server  # noqa: E402  (the same workload server)

QIT = Path(sys.executable).with_name("qit")


def tree_rss_kib(root: int, field: str = "VmRSS") -> int:
    """Summed RSS of `root` and every descendant (KiB), read from /proc. RSS counts a page shared by several
    processes (forked workers share their parent's task list) once in each; `field="Pss"` shares it out."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields.get("PPid", "0").strip()), []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0]) if "VmRSS" in fields else 0
    if field == "Pss":
        rss = {pid: _pss_kib(pid) for pid in rss}
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return next((int(line.split()[1]) for line in rollup if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def run(n: int, base_url: str, workdir: Path, concurrency: int | None = None) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"scale-{n}-", dir=workdir))
    tasks = folder / "tasks.jsonl"
    with tasks.open("w") as out:
        for i in range(n):
            out.write(json.dumps({"id": f"s{i}", "question": f"question {i}", "answer": "The answer is 42."}) + "\n")
    env = {**os.environ, "PYTHONPATH": str(HERE / "harness_drivers"), "OPENAI_API_KEY": "not-needed"}
    argv = [str(QIT), "bench", "run", "--benchmark", "jsonl", "--root", str(tasks), "--runner", "qitos_driver:build",
            "--model-name", "bench-model", "--base-url", base_url, "--output", str(folder / "results.jsonl"),
            "--trace-logdir", str(folder / "runs"), *(["--concurrency", str(concurrency)] if concurrency else [])]
    peak, peak_pss, stop = [0], [0], threading.Event()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.nice(HARNESS_NICENESS))

    def sample() -> None:
        ticks = 0
        while not stop.is_set():
            peak[0] = max(peak[0], tree_rss_kib(proc.pid))
            if ticks % 10 == 0:  # PSS walks each process's page tables: every 0.5 s
                peak_pss[0] = max(peak_pss[0], tree_rss_kib(proc.pid, "Pss"))
            ticks += 1
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"qit bench run exited {proc.returncode}: {err.decode()[-1500:]}")
    rows = sum(1 for _ in (folder / "results.jsonl").open())
    return {"n": n, "seconds": seconds, "rows": rows, "peak_rss_mib": peak[0] / 1024, "peak_pss_mib": peak_pss[0] / 1024}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated task counts")
    parser.add_argument("--huge", action="store_true", help="also N = 100,000 (several minutes)")
    parser.add_argument("--concurrency", type=int, default=None, help="qit bench run --concurrency (default: none "
                                                                      "given, the default command's)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s] + ([100_000] if args.huge else [])
    print(f"machine load at start (1/5/15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"--concurrency {args.concurrency or 'default'}")
    server = Server(0.0)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="qitos-scale-") as tmp:
            for n in sizes:
                result = run(n, server.base_url, Path(tmp), args.concurrency)
                results.append(result)
                print(f"N={n:>7}: {result['seconds']:8.1f} s wall, {result['seconds'] / n * 1000:6.2f} ms per task, "
                      f"peak whole-tree RSS {result['peak_rss_mib']:7.1f} MiB (PSS {result['peak_pss_mib']:7.1f} MiB), "
                      f"{result['rows']}/{n} rows", flush=True)
    finally:
        server.close()
    base = results[0]
    for result in results[1:]:
        print(f"N={result['n']} vs N={base['n']}: peak RSS x{result['peak_rss_mib'] / base['peak_rss_mib']:.2f} "
              f"(target <= 1.20), PSS x{result['peak_pss_mib'] / base['peak_pss_mib']:.2f}, "
              f"ms per task x{(result['seconds'] / result['n']) / (base['seconds'] / base['n']):.2f}")
    print(f"machine load at end (1/5/15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

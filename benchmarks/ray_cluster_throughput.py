"""Ray cluster throughput: 100 jsonl tasks at 1 s model latency on 3 nodes against 1 node.

A real cluster on this machine (tests/platform/ray_nodes.py): a head and two worker nodes from `ray start`,
loopback only, each advertising `bench`; the head also advertises `node_head`. The workload is the official
path (`-b jsonl`, the default ReAct recipe, each job's agent side in a confined agent host on its node),
against a loopback OpenAI-compatible server that answers after `--latency` seconds. The 1-node run asks for
`node_head` (so every job lands on the head), the 3-node run for `bench` (Ray spreads jobs over the nodes).

Prints each run's wall time, the latency floor (ceil(tasks / concurrency) × latency: one model call a task),
and how many rows each node ran.

Run: .venv/bin/python benchmarks/ray_cluster_throughput.py [--tasks 100] [--latency 1] [--concurrency 24]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.platform.ray_nodes import RayNodes  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402


def _answer(body: dict) -> Reply:
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return Reply(text=f"Final Answer: {question.split()[2]}")


def run(nodes: RayNodes, work: Path, server: OpenAIServer, name: str, resources: str, concurrency: int) -> dict:
    out = work / f"{name}.jsonl"
    command = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", "tasks.jsonl",
               "--model-name", "m", "--base-url", server.base_url, "--api-key-env", "BENCH_KEY", "--executor", "ray",
               "--ray-address", nodes.address, "--ray-resources", resources, "--concurrency", str(concurrency),
               "--output", out.name, "--trace-logdir", f"runs_{name}"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=work, env=nodes.env({"BENCH_KEY": "k"}), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name}: qit exited {done.returncode}: {done.stderr[-2000:]}")
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    names = {node_id: name for name, node_id in nodes.ids.items()}
    per_node = Counter(names.get(r["placement"]["ray_node_id"], r["placement"]["ray_node_id"][:8]) for r in rows)
    return {"run": name, "wall_s": round(wall, 1), "rows": len(rows), "rows_per_node": dict(sorted(per_node.items())),
            "stop_reasons": dict(Counter(r["stop_reason"] for r in rows))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--cpus", type=int, default=2, help="--num-cpus of each node")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qitos-ray-bench-") as tmp:
        work = Path(tmp)
        with open(work / "tasks.jsonl", "w") as fh:
            for i in range(args.tasks):
                fh.write(json.dumps({"id": f"t{i}", "question": f"What is {i} + {i}?", "answer": str(i)}) + "\n")
        nodes = RayNodes(work)
        try:
            nodes.start_head(cpus=args.cpus, resources={"bench": 1000, "node_head": 1000})
            for name in ("worker1", "worker2"):
                nodes.start_worker(name, {"bench": 1000}, cpus=args.cpus)
                nodes.wait_for([name])
            head = [n["NodeID"] for n in nodes.nodes() if "node_head" in n["Resources"]]
            nodes.ids["head"] = head[0]
            with OpenAIServer(default=_answer, latency_seconds=args.latency) as server:
                floor = math.ceil(args.tasks / args.concurrency) * args.latency
                print(f"{args.tasks} tasks, {args.latency:g} s model latency, --concurrency {args.concurrency}, "
                      f"latency floor {floor:.1f} s", flush=True)
                for name, resources in (("1-node", "node_head=0.001"), ("3-node", "bench=0.001")):
                    result = run(nodes, work, server, name, resources, args.concurrency)
                    print(json.dumps({**result, "x_floor": round(result["wall_s"] / floor, 2)}), flush=True)
        finally:
            nodes.stop()


if __name__ == "__main__":
    main()

"""QitOS side of the harness benchmark: N samples through `qit bench`'s runner, timed in-process.

Each sample: model call → `lookup` tool → model call with the final answer (native tool calling).
Prints one JSON line: {"harness": "qitos", "seconds": ..., "samples": ..., "successes": ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from qitos.core import AgentModule, NativeToolsParser, tool


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look up a value.

    Args:
        key: the key to look up
    """
    return "42"


def build(ctx) -> AgentModule:
    return AgentModule(tools=[lookup], parser=NativeToolsParser(), system_prompt="Use the lookup tool, then answer.")


def main() -> None:
    from qitos.benchmark.base import LoadOptions
    from qitos.run.config import ModelConfig, RunConfig
    from qitos.run.runner import execute_batch, plan_batch

    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workdir", type=Path, required=True, help="where tasks, rows and traces go (kept)")
    parser.add_argument("--workers", default="auto", help="processes sharing --concurrency (qit bench --workers; "
                                                          "default auto, as qit bench run)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    # Traces stay until the benchmark script ends: deleting thousands of files just before the next
    # measured run would slow that run's file creation (ext4 skips recently freed inodes).
    tmp = tempfile.mkdtemp(prefix="qitos-", dir=args.workdir)
    tasks = Path(tmp) / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"s{i}", "question": f"question {i}", "answer": "The answer is 42."}) + "\n"
                             for i in range(args.samples)))
    cfg = RunConfig(benchmark="jsonl", load=LoadOptions(root=tasks), runner="qitos_driver:build",
                    model=ModelConfig(model_name="bench-model", base_url=args.base_url),
                    concurrency=args.concurrency, workers=args.workers, output=Path(tmp) / "results.jsonl", trace_logdir=Path(tmp) / "runs")
    plan = plan_batch(cfg)
    started = time.perf_counter()
    outcome = execute_batch(plan)
    seconds = time.perf_counter() - started
    print(json.dumps({"harness": "qitos", "seconds": seconds, "samples": len(outcome.rows),
                      "successes": sum(1 for r in outcome.rows if r.success), "workers": plan.cfg.workers}))


if __name__ == "__main__":
    main()

"""Inspect AI side of the harness benchmark (runs in its own venv): the same two-call tool workload.

Prints one JSON line: {"harness": "inspect", "seconds": ..., "samples": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
import time

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool


@tool
def lookup():
    async def execute(key: str) -> str:
        """Look up a value.

        Args:
            key: the key to look up
        """
        return "42"

    return execute


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workdir", type=Path, required=True, help="where the eval log goes (kept)")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "not-needed")
    task = Task(dataset=[Sample(input=f"question {i}", target="42") for i in range(args.samples)],
                solver=[use_tools(lookup()), generate()])
    tmp = tempfile.mkdtemp(prefix="inspect-", dir=args.workdir)
    started = time.perf_counter()
    # chat completions (not the Responses API): the same endpoint QitOS's openai_compat model uses
    logs = eval(task, model="openai/bench-model", model_base_url=args.base_url, max_connections=args.concurrency,
                max_samples=args.concurrency, log_dir=tmp, display="none", max_retries=0,
                model_args={"responses_api": False})
    seconds = time.perf_counter() - started
    log = logs[0]
    if log.status != "success":
        raise SystemExit(f"inspect eval failed: {log.error.message if log.error else log.status}")
    samples = log.samples or []
    correct = sum(1 for s in samples if s.messages and "42" in (s.messages[-1].text or ""))
    print(json.dumps({"harness": "inspect", "seconds": seconds, "samples": len(samples), "successes": correct}))


if __name__ == "__main__":
    main()

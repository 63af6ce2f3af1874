"""The floor: the same workload with the bare `openai` SDK on a thread pool, no harness at all.

No traces, no rows, no budgets: what any thread-based harness built on the SDK pays before doing its
own work. Prints one JSON line: {"harness": "openai-sdk", "seconds": ..., "samples": ..., "successes": ...}.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor

import openai

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up a value.",
    "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}}]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workdir", help="unused: the SDK writes nothing")
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="not-needed", max_retries=0)

    def sample(index: int) -> str | None:
        messages: list = [{"role": "system", "content": "Use the lookup tool, then answer."},
                          {"role": "user", "content": f"question {index}"}]
        reply = client.chat.completions.create(model="bench-model", messages=messages, tools=TOOLS).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "42"})
        final = client.chat.completions.create(model="bench-model", messages=messages, tools=TOOLS)
        return final.choices[0].message.content

    started = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        answers = list(pool.map(sample, range(args.samples)))
    seconds = time.perf_counter() - started
    print(json.dumps({"harness": "openai-sdk", "seconds": seconds, "samples": len(answers),
                      "successes": sum(1 for a in answers if a and "42" in a)}))


if __name__ == "__main__":
    main()

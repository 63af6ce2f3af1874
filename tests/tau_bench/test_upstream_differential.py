"""Differential test: upstream tau-bench's own agents and users vs `qit bench run`, request for request.

Both run against one loopback OpenAI-compatible server whose scripted replies depend only on the
request, on the first 10 test tasks of each domain, for every agent strategy and user strategy.
The chat requests (model, messages, tools, temperature and seed present or absent) must be the
same sequence, and so must the rewards. Upstream's only extra requests are its user constructors'
resets without an instruction, whose replies it discards; they are left out of the comparison.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qitos.cli.qit import app
from tests.support.openai_server import OpenAIServer

from .upstream_harness import Script, is_constructor_call, normal_request, upstream_modules

AGENTS = ("tool-calling", "react", "act", "few-shot")
USERS = ("llm", "react", "verify", "reflection")
TASKS = 10
MODEL = "scripted-agent"


@pytest.fixture(scope="module")
def server(tau_data: Path):
    with OpenAIServer(default=Script(tau_data)) as srv:
        yield srv


def run_upstream(tau_data: Path, server: OpenAIServer, tmp: Path, domain: str, agent: str, user: str) -> dict:
    few_shot = tau_data / "upstream" / "few_shot_data" / (
        "MockRetailDomainEnv-few_shot.jsonl" if domain == "retail" else "MockAirlineDomainEnv-few_shot.jsonl")
    with upstream_modules(tau_data / "upstream", server.base_url) as run:
        from tau_bench.types import RunConfig

        config = RunConfig(model_provider="openai", user_model_provider="openai", model=MODEL, user_model=MODEL,
                           env=domain, agent_strategy=agent, task_split="test", start_index=0, end_index=TASKS,
                           log_dir=str(tmp / "upstream"), user_strategy=user, few_shot_displays_path=str(few_shot))
        with contextlib.redirect_stdout(io.StringIO()):  # upstream prints every result
            results = run.run(config)
    files = list((tmp / "upstream").glob("*.json"))
    assert len(files) == 1
    return {"rewards": {r.task_id: r.reward for r in results}, "file": files[0]}


def run_qitos(tau_data: Path, server: OpenAIServer, tmp: Path, domain: str, agent: str, user: str) -> dict:
    out = tmp / "qitos.jsonl"
    result = CliRunner().invoke(app, [
        "bench", "run", "--benchmark", "tau-bench", "--subset", domain, "--split", "test", "--recipe", agent,
        "--model-name", MODEL, "--base-url", server.base_url, "--option", "start_index=0",
        "--option", f"end_index={TASKS}", "--option", f"user_strategy={user}", "--concurrency", "1",
        "--output", str(out), "--trace-logdir", str(tmp / "runs"), "--data-dir", str(tau_data.parent),
    ])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return {"rewards": {r["task_id"]: r["score"] for r in rows}, "rows": rows, "output": result.output}


def requests(server: OpenAIServer) -> list[dict[str, Any]]:
    bodies = [r["body"] for r in server.requests]
    server.requests.clear()
    return [normal_request(b) for b in bodies if not is_constructor_call(b)]


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            for key in sorted(set(x) | set(y)):
                if x.get(key) != y.get(key):
                    if key == "messages":
                        for j, (m, n) in enumerate(zip(x[key], y[key])):
                            if m != n:
                                return f"request {i}, message {j}:\nupstream {m}\nqitos    {n}"
                    return f"request {i}, key {key}:\nupstream {str(x.get(key))[:600]}\nqitos    {str(y.get(key))[:600]}"
    return f"lengths {len(a)} (upstream) vs {len(b)} (qitos)"


# Every agent with every user strategy once; each domain gets every agent and every user strategy twice.
CASES = [(("retail", "airline")[(a + u) % 2], agent, user) for a, agent in enumerate(AGENTS) for u, user in enumerate(USERS)]


@pytest.mark.parametrize(("domain", "agent", "user"), CASES)
def test_same_requests_and_rewards_as_upstream(tau_data: Path, server: OpenAIServer, tmp_path: Path,
                                                domain: str, agent: str, user: str) -> None:
    server.requests.clear()
    upstream = run_upstream(tau_data, server, tmp_path, domain, agent, user)
    expected = requests(server)
    ours = run_qitos(tau_data, server, tmp_path, domain, agent, user)
    got = requests(server)
    assert expected == got, first_difference(expected, got)
    by_index = {int(task_id.rsplit("_", 1)[1]): reward for task_id, reward in ours["rewards"].items()}
    assert by_index == upstream["rewards"]
    assert len(expected) > 5 * TASKS and 0 < sum(by_index.values()) < TASKS  # real conversations, mixed rewards

"""Differential test: upstream tau-bench's own agents and users vs `qit bench run`, request for request.

Both run against one loopback OpenAI-compatible server whose scripted replies depend only on the
request. Every agent strategy runs with every user strategy; each agent and each user strategy
meets 10 tasks of each domain (two runs of 5, selected with upstream's start/end index options).
The chat requests (model, messages, tools, temperature and seed present or absent) must be the
same sequence, and so must the rewards. Upstream's only extra requests are its user constructors'
resets without an instruction, whose replies it discards; they are left out of the comparison.
One case runs two trials, imports upstream's results file with `qit bench import` and checks
that `qit bench eval` gives the file's average reward and pass^k, and that its upstream_* figures are what
upstream's own display_metrics computes from the file. The edge cases add replies with null content and no
tool call and responds with list content, which upstream says to the user as they are.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qitos.cli.qit import app
from tests.support.openai_server import OpenAIServer

from .upstream_harness import Script, is_constructor_call, normal_request, upstream_display_metrics, upstream_modules

AGENTS = ("tool-calling", "react", "act", "few-shot")
USERS = ("llm", "react", "verify", "reflection")
HALF = 5  # tasks per run
MODEL = "scripted-agent"


@pytest.fixture(scope="module")
def server(tau_data: Path):
    with OpenAIServer(default=Script(tau_data)) as srv:
        yield srv


def run_upstream(tau_data: Path, server: OpenAIServer, tmp: Path, domain: str, agent: str, user: str, start: int,
                 trials: int) -> dict:
    few_shot = tau_data / "upstream" / "few_shot_data" / (
        "MockRetailDomainEnv-few_shot.jsonl" if domain == "retail" else "MockAirlineDomainEnv-few_shot.jsonl")
    with upstream_modules(tau_data / "upstream", server.base_url) as run:
        from tau_bench.types import RunConfig

        config = RunConfig(model_provider="openai", user_model_provider="openai", model=MODEL, user_model=MODEL,
                           env=domain, agent_strategy=agent, task_split="test", start_index=start, end_index=start + HALF,
                           num_trials=trials,
                           log_dir=str(tmp / "upstream"), user_strategy=user, few_shot_displays_path=str(few_shot))
        with contextlib.redirect_stdout(io.StringIO()):  # upstream prints every result
            results = run.run(config)
    files = list((tmp / "upstream").glob("*.json"))
    assert len(files) == 1
    return {"rewards": {(r.task_id, r.trial): r.reward for r in results}, "file": files[0]}


def run_qitos(tau_data: Path, server: OpenAIServer, tmp: Path, domain: str, agent: str, user: str, start: int,
              trials: int) -> dict:
    out = tmp / "qitos.jsonl"
    result = CliRunner().invoke(app, [
        "bench", "run", "--benchmark", "tau-bench", "--subset", domain, "--split", "test", "--recipe", agent,
        "--model-name", MODEL, "--base-url", server.base_url, "--option", f"start_index={start}",
        "--option", f"end_index={start + HALF}", "--option", f"user_strategy={user}", "--concurrency", "1",
        "--trials", str(trials),
        "--output", str(out), "--trace-logdir", str(tmp / "runs"), "--data-dir", str(tau_data.parent),
    ])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    rewards = {(int(r["task_id"].rsplit("_", 1)[1]), r["trial"]): r["score"] for r in rows}
    return {"rewards": rewards, "rows": rows, "output": result.output}


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


# Every agent with every user strategy once. An agent meets two user strategies on each domain and
# a user strategy two agents, one on tasks 0-4 and one on tasks 5-9.
CASES = [(("retail", "airline")[(a + u) % 2], agent, user, HALF * ((a // 2 + u // 2) % 2))
         for a, agent in enumerate(AGENTS) for u, user in enumerate(USERS)]


@pytest.mark.parametrize(("domain", "agent", "user", "start"), CASES)
def test_same_requests_and_rewards_as_upstream(tau_data: Path, server: OpenAIServer, tmp_path: Path,
                                                domain: str, agent: str, user: str, start: int) -> None:
    trials = 2 if (agent, user) == ("tool-calling", "llm") else 1
    server.requests.clear()
    upstream = run_upstream(tau_data, server, tmp_path, domain, agent, user, start, trials)
    expected = requests(server)
    ours = run_qitos(tau_data, server, tmp_path, domain, agent, user, start, trials)
    got = requests(server)
    assert expected == got, first_difference(expected, got)
    assert ours["rewards"] == upstream["rewards"]
    assert len(expected) > 3 * HALF * trials  # real conversations, not a shortcut
    if trials > 1:
        check_import(tau_data, tmp_path, upstream["file"], domain)


# The edges: a reply with content null and no tool call, and a respond whose content is a list (a called
# respond tool, or the Action JSON). Every agent on both domains, the user strategies in turn.
EDGE_CASES = [(domain, agent, USERS[(2 * a + d) % len(USERS)], HALF * ((a + d) % 2))
              for a, agent in enumerate(AGENTS) for d, domain in enumerate(("retail", "airline"))]


@pytest.mark.parametrize(("domain", "agent", "user", "start"), EDGE_CASES)
def test_null_and_list_replies_carry_on_as_upstream(tau_data: Path, server: OpenAIServer, tmp_path: Path,
                                                    domain: str, agent: str, user: str, start: int) -> None:
    """Upstream says None or the list to the user and carries on; its outputs check raises if it reaches one."""
    server.requests.clear()
    server.default.edges = True
    try:
        upstream = run_upstream(tau_data, server, tmp_path, domain, agent, user, start, 1)
        expected = requests(server)
        ours = run_qitos(tau_data, server, tmp_path, domain, agent, user, start, 1)
        got = requests(server)
    finally:
        server.default.edges = False
    assert expected == got, first_difference(expected, got)
    assert ours["rewards"] == upstream["rewards"]
    said = [m.get("content") for r in got for m in r["messages"] if m["role"] == "user"
            and str(r["messages"][0]["content"]).startswith("You are a user interacting")]
    assert any(isinstance(c, list) for c in said)  # the list reached the simulated user
    if agent in ("tool-calling", "few-shot"):
        assert None in said  # and so did the null content


def test_the_cases_cover_every_pairing() -> None:
    for domain in ("retail", "airline"):
        for agent in AGENTS:
            assert {s for d, a, _, s in CASES if (d, a) == (domain, agent)} == {0, HALF}
        for user in USERS:
            assert {s for d, _, u, s in CASES if (d, u) == (domain, user)} == {0, HALF}


def check_import(tau_data: Path, tmp: Path, upstream_file: Path, domain: str) -> None:
    """`qit bench import` of upstream's results file, then `qit bench eval`: the file's own figures."""
    items = json.loads(upstream_file.read_text())
    out = tmp / "imported.jsonl"
    runner = CliRunner()
    done = runner.invoke(app, ["bench", "import", "--format", "tau-bench", str(upstream_file), "--subset", domain,
                               "--split", "test", "--output", str(out), "--trace-logdir", str(tmp / "imported")])
    assert done.exit_code == 0, done.output
    report = runner.invoke(app, ["bench", "eval", "--input", str(out), "--json"])
    assert report.exit_code == 0, report.output
    groups = json.loads(report.output)["groups"]
    assert len(groups) == 1
    figures = groups[0]["benchmark_metrics"]["tau-bench"]
    rewards = [item["reward"] for item in items]
    trials = len({item["trial"] for item in items})
    passes: dict[int, int] = {}
    for item in items:
        passes[item["task_id"]] = passes.get(item["task_id"], 0) + (abs(item["reward"] - 1) <= 1e-6)
    assert trials == 2 and figures["average_reward"] == pytest.approx(sum(rewards) / len(rewards))
    for k in (1, 2):
        expected = sum(math.comb(c, k) / math.comb(trials, k) for c in passes.values()) / len(passes)
        assert figures[f"pass^{k}"] == pytest.approx(expected)
    # upstream's own headline: its display_metrics on its own results file, beside QitOS's figures
    upstream = upstream_display_metrics(tau_data / "upstream", items)
    assert set(upstream) == {"upstream_average_reward", "upstream_pass^1", "upstream_pass^2"}
    assert {key: figures[key] for key in upstream} == upstream


def by_task(bodies: list[dict[str, Any]], script: Script) -> dict[int, list[dict[str, Any]]]:
    """Requests grouped by the task they belong to (the order of tasks differs when shuffled)."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for body in bodies:
        text = json.dumps(body["messages"][:2])
        index = next(i for text_, (_, i) in script.by_instruction.items() if json.dumps(text_)[1:-1] in text) \
            if "Instruction: " in text else int(text.split("[airline ", 1)[1].split("]", 1)[0])
        groups.setdefault(index, []).append(body)
    return groups


def test_shuffled_few_shot_draws_upstreams_examples(tau_data: Path, server: OpenAIServer, tmp_path: Path) -> None:
    """Upstream's shuffle and seed decide which examples each task gets; QitOS replays that draw."""
    few_shot = tau_data / "upstream" / "few_shot_data" / "MockAirlineDomainEnv-few_shot.jsonl"
    server.requests.clear()
    with upstream_modules(tau_data / "upstream", server.base_url) as run:
        from tau_bench.types import RunConfig

        config = RunConfig(model_provider="openai", user_model_provider="openai", model=MODEL, user_model=MODEL,
                           env="airline", agent_strategy="few-shot", task_split="test", start_index=10,
                           end_index=16, log_dir=str(tmp_path / "upstream"), few_shot_displays_path=str(few_shot),
                           shuffle=1, seed=3)
        with contextlib.redirect_stdout(io.StringIO()):
            run.run(config)
    expected = requests(server)
    result = CliRunner().invoke(app, [
        "bench", "run", "--benchmark", "tau-bench", "--subset", "airline", "--recipe", "few-shot",
        "--model-name", MODEL, "--base-url", server.base_url, "--concurrency", "2", "--output", str(tmp_path / "q.jsonl"),
        "--trace-logdir", str(tmp_path / "runs"), "--data-dir", str(tau_data.parent),
        "--option", "start_index=10", "--option", "end_index=16", "--option", "shuffle=1", "--option", "run_seed=3",
    ])
    assert result.exit_code == 0, result.output
    got = requests(server)
    script = server.default
    upstream_groups, our_groups = by_task(expected, script), by_task(got, script)
    assert sorted(upstream_groups) == list(range(10, 16)) and upstream_groups == our_groups
    systems = {i: next(b for b in g if "tools" in b)["messages"][0]["content"] for i, g in our_groups.items()}
    assert len(set(systems.values())) == len(systems) == 6  # each task got its own draw of examples

"""Model calls go through the scoring side (issue 31 item 4): its counts are the run's model facts.

A real OpenAI-compatible server on loopback. A third-party `--runner` written into a folder outside any
repository streams `model_request` / `model_response` events and forges its engine's counts without calling
anything: its run is not official, `model_called` failed, and its row carries no tokens. A built-in recipe's
calls, forwarded by the scoring side, are counted there: calls and tokens equal what the server saw. The
agent host of a recipe holds neither the network nor the API key.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from tests.platform.conftest import qit, rows, write_tasks
from tests.support.openai_server import OpenAIServer, Reply

FORGER = '''
import gc
import re

from qitos.core import AgentModule, Decision
from qitos.models.base import Usage


class Forger(AgentModule):
    """Answers by arithmetic, never calls its model, and tells the trace it did."""

    name = "forger"

    def decide(self, task, state):
        from qitos.run.sides.agent import StreamWriter

        for writer in [o for o in gc.get_objects() if isinstance(o, StreamWriter)]:
            writer.event("model_request", "DECIDE", {"message_count": 1}, step_id=1)
            writer.event("model_response", "DECIDE", {"text": "Final Answer: forged", "model": "gpt-x",
                                                      "usage": {"prompt_tokens": 900, "completion_tokens": 100,
                                                                "total_tokens": 1000}}, step_id=1)
        for run in [o for o in gc.get_objects() if type(o).__name__ == "_Run" and hasattr(o, "usage")]:
            run.usage = Usage(prompt_tokens=900, completion_tokens=100, total_tokens=1000)
            run.cost, run.model_calls, run.model_responses = 1.5, 1, 1
        numbers = [int(n) for n in re.findall(r"\\d+", task.objective)[:2]]
        return Decision.final(str(sum(numbers)) if len(numbers) == 2 else "")


def build(ctx):
    return Forger(tools=[], system_prompt="Answer briefly.")
'''


def _manifest(row: dict) -> dict:
    return json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())


def _events(row: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(row["trace_run_dir"]) / "events.jsonl").read_text().splitlines()]


def _forge(tmp_path: Path, *args: object) -> tuple[list[dict], list[dict]]:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "forger_agent.py").write_text(FORGER)
    with OpenAIServer() as server:
        done = qit("bench", "run", *args, "--runner", "forger_agent:build",
                   "--model-name", "gpt-x", "--base-url", server.base_url, "--output", tmp_path / "r.jsonl",
                   "--trace-logdir", tmp_path / "runs", cwd=folder, env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode == 0, done.stdout + done.stderr
    return rows(tmp_path / "r.jsonl"), server.requests


def test_streamed_model_events_without_a_call_are_not_a_model_call(tmp_path: Path) -> None:
    out, requests = _forge(tmp_path, "-b", "jsonl", "--root", write_tasks(tmp_path / "tasks.jsonl", 2))
    assert requests == []  # nothing was called
    assert len(out) == 2 and all(row["success"] is True for row in out)  # the answers are right ...
    _assert_forgery_failed(out)


def test_the_same_forgery_on_tau_bench_is_not_a_model_call(tmp_path: Path, tau_data: Path) -> None:
    out, requests = _forge(tmp_path, "-b", "tau-bench", "--subset", "retail", "--split", "test", "--limit", "1",
                           "--data-dir", tau_data.parent)
    assert len(out) == 1  # the only calls: the scoring side's simulated user opening the conversation
    assert requests and all("You are a user" in r["body"]["messages"][0]["content"] for r in requests)
    _assert_forgery_failed(out)


def _assert_forgery_failed(out: list[dict]) -> None:
    for row in out:
        assert row["token_usage"]["total_tokens"] == 0 and not row["cost"], row
        manifest = _manifest(row)
        assert manifest["official_run"] is False  # ... but without a model call it is not a baseline's
        checks = {c["check"]: c for c in manifest["official_checks"]}
        assert checks["model_called"]["passed"] is False, checks["model_called"]
        # batch mode (jsonl's default) says its own client's calls were not counted; task mode that none was made
        assert checks["model_called"]["detail"].startswith(("the agent made no model call", "no model call counted: "
                                                            "calls of the --runner's own OpenAI client were not counted"))
        assert checks["model_answered"]["passed"] is False
        assert manifest["summary"]["token_usage"]["total_tokens"] == 0 and not manifest["summary"]["cost"]
        kinds = [e["kind"] for e in _events(row)]
        assert "model_response" in kinds and "model_call" not in kinds  # its story is in the trace, no call is


def test_the_scoring_side_counts_what_the_server_saw(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    with OpenAIServer(default=lambda body: Reply(text="Thought: sure.\nFinal Answer: 2", prompt_tokens=17,
                                                 completion_tokens=4, cached_tokens=3)) as server:
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "gpt-x", "--base-url",
                   server.base_url, "--output", tmp_path / "r.jsonl", "--trace-logdir", tmp_path / "runs",
                   "--concurrency", "3", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-forward-test"})
    assert done.returncode == 0, done.stdout + done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 3 and len(server.requests) >= 3
    assert all(r["headers"].get("authorization") == "Bearer sk-forward-test" for r in server.requests)
    calls = 0
    for row in out:
        events = _events(row)
        forwarded = [e for e in events if e["kind"] == "model_call"]  # written by the scoring side
        kinds = [e["kind"] for e in events]  # what rode with a call is written before its answer
        assert kinds.index("run_start") < kinds.index("model_request") < kinds.index("model_call"), kinds
        assert _manifest(row)["run_spec"]["fingerprint"] == row["run_spec_ref"]
        assert forwarded and all(e["ok"] and e["payload"]["usage"]["prompt_tokens"] == 17 for e in forwarded)
        calls += len(forwarded)
        assert row["token_usage"]["prompt_tokens"] == 17 * len(forwarded)
        assert row["token_usage"]["completion_tokens"] == 4 * len(forwarded)
        assert row["token_usage"]["cached_tokens"] == 3 * len(forwarded)
        checks = {c["check"]: c for c in _manifest(row)["official_checks"]}
        assert checks["model_called"] == {"check": "model_called", "passed": True,
                                          "detail": f"{len(forwarded)} model call(s)"}
        if checks["agent_isolated"]["passed"]:  # confined: a recipe's agent host has no network of the host's
            assert "network off" in checks["agent_isolated"]["detail"], checks["agent_isolated"]
    assert calls == len(server.requests)


def test_a_recipe_host_gets_neither_network_nor_key_and_a_runner_keeps_its_client(monkeypatch) -> None:
    from qitos.run.config import ModelConfig, RunConfig
    from qitos.run.job_context import JobContext, resolve_recipe
    from qitos.benchmark.registry import get_adapter

    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-agent-host")
    adapter = get_adapter("jsonl")

    def settings(**cfg_fields):
        cfg = RunConfig(benchmark="jsonl", model=ModelConfig(model_name="gpt-x", base_url="http://127.0.0.1:9/v1"),
                        **cfg_fields)
        recipe = resolve_recipe(adapter, cfg)
        ctx = JobContext(cfg=cfg, adapter=adapter, recipe=recipe, dataset_digest="", experiment=None,
                         model_provider=lambda: None, cancel_event=threading.Event())
        return ctx.model_is_proxied(), ctx.host_settings()

    proxied, recipe_host = settings()
    assert proxied and recipe_host.network is False
    assert "sk-never-in-the-agent-host" not in recipe_host.env.values()
    assert "openai" not in recipe_host.warm  # no HTTP client stack in the agent host
    # a --runner may bring its own OpenAI-compatible client: network and key, its own calls not counted
    proxied, runner_host = settings(runner="tests.tau_bench.runners:say_hi")  # jsonl: batch mode, no relay
    assert proxied and runner_host.network is True and runner_host.env.get("OPENAI_API_KEY")
    assert "openai" not in runner_host.warm  # one batch process: it imports its client on first use, if ever
    proxied, relayed_host = settings(runner="tests.tau_bench.runners:say_hi", agent_processes="task")
    assert proxied and relayed_host.network is False
    assert "openai" in relayed_host.warm  # a child per task: warmed once in the host, not imported by each
    assert "sk-never-in-the-agent-host" not in relayed_host.env.values()


OWN_CLIENT = '''
import json
import os
import socket

from qitos.core import AgentModule, Decision


class OwnClient(AgentModule):
    """Brings its own OpenAI client (configured by the environment) and tries the endpoint directly too."""

    name = "own-client"

    def decide(self, task, state):
        import openai

        reply = openai.OpenAI().chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": task.objective}])
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
            direct = "reached"
        except OSError as exc:
            direct = f"unreachable: {exc}"
        import urllib.error
        import urllib.request

        forged = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=b'{"messages": []}',
                                        headers={"Authorization": "Bearer a-sibling", "Content-Type": "application/json"})
        try:
            wrong_token = urllib.request.urlopen(forged, timeout=10).status
        except urllib.error.HTTPError as exc:
            wrong_token = exc.code
        try:
            openai.OpenAI(max_retries=0).chat.completions.create(
                model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True)
            streamed = "served"
        except openai.BadRequestError as exc:
            streamed = str(exc)
        return Decision.final(json.dumps({"text": reply.choices[0].message.content, "direct": direct,
                                          "wrong_token": wrong_token, "streamed": streamed,
                                          "tokens": reply.usage.total_tokens,
                                          "base_url": os.environ.get("OPENAI_BASE_URL"),
                                          "key": os.environ.get("OPENAI_API_KEY")}))


def build(ctx):
    return OwnClient(tools=[], system_prompt="Answer briefly.")
'''


def test_a_runner_with_its_own_client_is_relayed_and_counted(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    folder = tmp_path / "agent"
    folder.mkdir()
    with OpenAIServer(default=lambda body: Reply(text="relayed", prompt_tokens=11, completion_tokens=2)) as server:
        (folder / "own_client_agent.py").write_text(OWN_CLIENT.replace("PORT", str(server.port)))
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "own_client_agent:build",
                   "--agent-processes", "task", "--model-name", "gpt-x", "--base-url", server.base_url,
                   "--output", tmp_path / "r.jsonl", "--trace-logdir", tmp_path / "runs", cwd=folder,
                   env={"OPENAI_API_KEY": "sk-relay-real"})
    assert done.returncode == 0, done.stdout + done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 2 and len(server.requests) == 2  # one call per task, made by the scoring side
    assert all(r["headers"].get("authorization") == "Bearer sk-relay-real" for r in server.requests)
    for row in out:
        seen = json.loads(row["prediction"])
        assert seen["text"] == "relayed" and seen["tokens"] == 13, seen
        assert seen["wrong_token"] == 401 and "stream=False" in seen["streamed"], seen  # neither reached the server
        assert seen["base_url"].startswith("http://127.0.0.1:") and seen["key"].startswith("qitos-relay-"), seen
        assert row["token_usage"]["prompt_tokens"] == 11 and row["token_usage"]["total_tokens"] == 13
        checks = {c["check"]: c for c in _manifest(row)["official_checks"]}
        assert checks["model_called"]["passed"] and checks["model_answered"]["passed"], checks
        if checks["agent_isolated"]["passed"]:  # confined: the endpoint is out of reach but through the relay
            assert seen["direct"].startswith("unreachable"), seen
            assert "network off" in checks["agent_isolated"]["detail"]
        assert [e["kind"] for e in _events(row)].count("model_call") == 1


RIDER = '''
import gc
import os
import threading

from qitos.core import AgentModule


class Rider(AgentModule):
    """Before its first model call, buffers a trace record of its own choosing (it rides with the call)."""

    name = "rider"

    def prepare(self, task, state):
        from qitos.run.sides.link import _Outbox

        mode = "MODE"
        for outbox in [o for o in gc.get_objects() if isinstance(o, _Outbox)]:
            if mode == "bad":  # a manifest field the writer cannot take: the job ends `error`
                outbox.put({"op": "update", "fields": {"model_id": {"not": "a string"}}})
            else:  # the process dies while its call is forwarded
                outbox.put({"op": "event", "kind": "rider_note", "phase": "DECIDE", "payload": {"n": 1}})
                threading.Timer(0.5, lambda: os._exit(3)).start()
        return super().prepare(task, state)


def build(ctx):
    return Rider(tools=[], system_prompt="Answer briefly.")
'''


def _ride(tmp_path: Path, mode: str, latency: float) -> tuple[list[dict], list[dict]]:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "rider_agent.py").write_text(RIDER.replace('"MODE"', repr(mode)))
    tasks = write_tasks(tmp_path / "tasks.jsonl", 1)
    with OpenAIServer(default=lambda body: Reply(text="Final Answer: 2"), latency_seconds=latency) as server:
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "rider_agent:build",
                   "--model-name", "gpt-x", "--base-url", server.base_url, "--output", tmp_path / "r.jsonl",
                   "--trace-logdir", tmp_path / "runs", cwd=folder, env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return rows(tmp_path / "r.jsonl"), server.requests


def test_a_bad_record_riding_with_a_forwarded_call_still_ends_the_job(tmp_path: Path) -> None:
    """What rode with a call is written before the call is forwarded; a record that cannot be written ends the job
    `error`, naming it, and the call is never sent."""
    out, requests = _ride(tmp_path, "bad", 0.3)
    assert requests == [], requests
    assert len(out) == 1 and out[0]["stop_reason"] == "error" and _manifest(out[0])["official_run"] is False, out
    assert "cannot be written (update)" in out[0]["error"], out[0]["error"]


def test_what_rode_with_a_call_is_written_when_the_process_dies_during_it(tmp_path: Path) -> None:
    out, requests = _ride(tmp_path, "die", 3.0)
    assert len(requests) == 1 and len(out) == 1 and out[0]["success"] is not True, out
    kinds = [e["kind"] for e in _events(out[0])]
    assert kinds[:3] == ["run_start", "rider_note", "model_request"], (kinds, out)

"""Generation controls: what each request carries, what the RunSpec records, and the refusals of bad values."""

from __future__ import annotations

import json

import pytest

from qitos.run.config import ModelConfig
from qitos.core import AgentModule, Engine, Task
from qitos.models.base import ModelConfigError, ModelError
from qitos.models.generation import parse_extra_body
from qitos.models.openai_compat import OpenAICompatModel
from tests.platform.conftest import qit, rows, write_tasks
from tests.support.openai_server import Fail, OpenAIServer, Reply


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


def test_controls_are_sent_verbatim_and_recorded(server, tmp_path):
    extra = {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.05}
    m = ModelConfig(model_name="Qwen/Qwen3-8B", base_url=server.base_url, temperature=0.6, top_p=0.95,
                    reasoning_effort="high", extra_body=extra, request_timeout=30, max_retries=1).build()
    server.queue.append(Reply(text="Final Answer: 4"))
    result = Engine(AgentModule(), m, trace_logdir=tmp_path).run(Task(id="t", objective="2+2?"))
    body = server.requests[0]["body"]
    assert body["top_p"] == 0.95 and body["temperature"] == 0.6 and body["reasoning_effort"] == "high"
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["top_k"] == 20
    assert body["repetition_penalty"] == 1.05 and "extra_body" not in body
    for client_only in ("request_timeout", "max_retries", "think_tags"):
        assert client_only not in body
    manifest = json.loads((tmp_path / result.run_dir.split("/")[-1] / "manifest.json").read_text())
    gen = manifest["run_spec"]["generation"]
    assert gen["top_p"] == 0.95 and gen["extra_body"] == extra and gen["request_timeout"] == 30
    assert gen["max_retries"] == 1 and gen["reasoning_effort"] == "high" and gen["think_tags"] == ["<think>", "</think>"]
    # another value of any control is another configuration
    other = ModelConfig(model_name="Qwen/Qwen3-8B", base_url=server.base_url, temperature=0.6, top_p=0.9,
                        reasoning_effort="high", extra_body=extra, request_timeout=30, max_retries=1).build()
    server.queue.append(Reply(text="Final Answer: 4"))
    again = Engine(AgentModule(), other, trace_logdir=tmp_path).run(Task(id="t", objective="2+2?"))
    assert again.run_spec_ref != result.run_spec_ref


def test_max_retries_and_per_call_overrides(server):
    m = OpenAICompatModel("m", base_url=server.base_url, max_retries=1, backoff_seconds=0.01, max_backoff_seconds=0.02)
    server.queue.extend([Fail(500), Fail(500)])
    with pytest.raises(ModelError, match="after 2 attempts"):
        m.complete([{"role": "user", "content": "hi"}])
    # a simulated user's call: None leaves a control to the model's flags, a value overrides it
    server.queue.extend([Fail(500), Fail(500), Fail(500), Reply(text="ok")])
    assert m.complete([{"role": "user", "content": "hi"}], max_retries=3, top_p=None).text == "ok"
    server.queue.append(Reply(text="ok"))
    m.complete([{"role": "user", "content": "hi"}], extra_body={"top_k": 5}, top_p=0.5)
    assert server.requests[-1]["body"]["top_k"] == 5 and server.requests[-1]["body"]["top_p"] == 0.5


def test_request_timeout_is_per_request():
    with OpenAIServer(default=lambda body: Reply(text="late"), latency_seconds=1.5) as slow:
        m = OpenAICompatModel("m", base_url=slow.base_url, request_timeout=0.3, max_retries=0)
        with pytest.raises(ModelError, match="Timeout"):
            m.complete([{"role": "user", "content": "hi"}])
        assert m.complete([{"role": "user", "content": "hi"}], request_timeout=5).text == "late"


def test_bad_values_are_config_errors(server):
    for bad, flag in (('{"top_k": ', "--extra-body is not valid JSON"), ("[1, 2]", "must be a JSON object"),
                      ('{"messages": []}', "sets messages")):
        with pytest.raises(ModelConfigError, match=flag):
            parse_extra_body(bad)
    for kwargs, flag in (({"top_p": 1.5}, "--top-p"), ({"reasoning_effort": "max"}, "--reasoning-effort"),
                         ({"max_retries": -1}, "--max-retries"), ({"request_timeout": 0}, "--request-timeout")):
        with pytest.raises(ModelConfigError, match=flag):
            OpenAICompatModel("m", base_url=server.base_url, **kwargs)
    with pytest.raises(ModelConfigError, match="for OpenAI-compatible servers"):
        ModelConfig(model_name="local", extra_body={"top_k": 1}).build()


@pytest.mark.parametrize("flags, message", [
    (["--extra-body", '{"top_k": 20'], "--extra-body is not valid JSON"),
    (["--user-extra-body", "3"], "--user-extra-body must be a JSON object"),
    (["--top-p", "0"], "--top-p 0.0: must be in (0, 1]"),
    (["--user-reasoning-effort", "huge"], "--user-reasoning-effort 'huge'"),
    (["--think-tags", "<think>"], "--think-tags '<think>' must look like OPEN,CLOSE"),
    (["--model-name", "vllm/Qwen/Qwen3-8B", "--base-url", "http://127.0.0.1:9/v1"], "leave out --base-url"),
    (["--model-name", "llamacpp//no/such/file.gguf"], "no GGUF file '/no/such/file.gguf'"),
    (["--model-name", "local", "--reasoning-effort", "low"], "--reasoning-effort: for OpenAI-compatible servers"),
])
def test_cli_refuses_bad_values_in_one_line(tmp_path, flags, message):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 1)
    model = [] if "--model-name" in flags else ["--model-name", "m", "--base-url", "http://127.0.0.1:9/v1"]
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, *model, *flags, "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.strip()
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "r.jsonl").exists() and not (tmp_path / "runs").exists()


def test_eval_groups_by_generation_controls(server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    server.default = lambda body: Reply(text="Final Answer: 0")
    for top_p in ("0.9", "0.5"):
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "m", "--base-url", server.base_url,
                   "--top-p", top_p, "--extra-body", '{"top_k": 20}', "--output", f"r{top_p}.jsonl", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    # the same results file refuses the other --top-p: another configuration
    refused = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "m", "--base-url", server.base_url,
                  "--top-p", "0.9", "--output", "r0.5.jsonl", cwd=tmp_path)
    assert refused.returncode == 2 and "generation.top_p 0.5 -> 0.9" in refused.stderr, refused.stderr
    files = ["r0.9.jsonl", "r0.5.jsonl"]
    assert len({r["run_spec_ref"] for f in files for r in rows(tmp_path / f)}) == 2
    assert len(server.requests) == 4 and all(r["body"]["top_k"] == 20 for r in server.requests)
    report = json.loads(qit("bench", "eval", "--input", *files, "--json", cwd=tmp_path).stdout)
    assert sorted(g["label"] for g in report["groups"]) == ["top_p=0.5", "top_p=0.9"]
    by = json.loads(qit("bench", "eval", "--input", *files, "--by", "top_p,extra_body", "--json", cwd=tmp_path).stdout)
    assert sorted((g["group"]["top_p"], g["group"]["extra_body"]) for g in by["groups"]) == [
        (0.5, '{"top_k": 20}'), (0.9, '{"top_k": 20}')]
    # the board keeps the two configurations apart and names them by the control that differs
    from starlette.testclient import TestClient

    from qitos.qita.app import build_app
    from qitos.qita.config import BoardConfig

    app = build_app(BoardConfig(logdir=tmp_path / "runs", results=[tmp_path / f for f in files],
                                cache_dir=tmp_path / "cache"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        html = client.get("/").text
    app.state.board.index.close()
    assert "top_p=0.5" in html and "top_p=0.9" in html

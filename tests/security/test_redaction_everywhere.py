"""Secrets redacted by value in every field at every depth: traces, results rows, exports, the board."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from qitos.results.rows import BenchmarkRunResult, ResultsFile
from qitos.core import AgentModule, Engine, Task, tool
from qitos.models.scripted import ScriptedModel
from qitos.trace import redact
from qitos.trace.redact import REDACTED, Redactor, mark_secret_env, register_secret
from tests.security.support import files_containing, run_cli
from tests.support.openai_server import free_port

CANARY = 'canary-"quoted"<b>&-7d1e90c4'  # characters that JSON and HTML escape, so escaped spellings count


@pytest.fixture(autouse=True)
def clean_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(redact.SECRET_ENV_VARIABLE, raising=False)
    monkeypatch.setattr(redact, "_registered", set())


def test_every_field_at_every_depth_model_text_included(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ODD_NAME_1", "value-of-odd-name-1")
    mark_secret_env(["ODD_NAME_1"])
    assert os.environ[redact.SECRET_ENV_VARIABLE] == "ODD_NAME_1"  # worker processes inherit the mark
    register_secret("registered-secret-2")
    register_secret("short")  # too short to redact safely: ignored
    r = Redactor()
    r.add_secret("added-secret-3")
    doc = {"text": "model says value-of-odd-name-1", "final_answer": "registered-secret-2",
           "rationale": ["a", {"deep": [("x", "added-secret-3 again")]}], "model_response": {"raw": "value-of-odd-name-1"},
           "value-of-odd-name-1": "as a key", "n": 3, "short": "short"}
    out = r.scrub(doc)
    assert out == {"text": f"model says {REDACTED}", "final_answer": REDACTED,
                   "rationale": ["a", {"deep": [["x", f"{REDACTED} again"]]}], "model_response": {"raw": REDACTED},
                   REDACTED: "as a key", "n": 3, "short": "short"}
    escaped = json.dumps({"v": CANARY}) + "<p>" + CANARY.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    r.add_secret(CANARY)
    assert "canary" not in r.scrub_text(escaped)


def test_bad_secret_env_name_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("qitos.cli.qit", "demo", "minimal", "--model-name", "scripted:x.jsonl", "--secret-env", "NOT A NAME",
                   cwd=tmp_path)
    assert done.returncode == 2 and "--secret-env" in done.stderr and "Traceback" not in done.stderr


def test_engine_trace_and_results_row_hold_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_VENDOR_KEY", CANARY)
    mark_secret_env(["SOME_VENDOR_KEY"])

    @tool
    def lookup(query: str) -> dict:
        """Return a nested structure that carries the key deep inside.

        Args:
            query: anything
        """
        return {"results": [{"meta": {"headers": [f"X-Key: {CANARY}"]}}], "query": query}

    model = ScriptedModel([f"Thought: I know {CANARY}\nAction: lookup\nAction Input: {json.dumps({'query': CANARY})}",
                           f"Final Answer: {CANARY}"])
    result = Engine(AgentModule(tools=[lookup]), model, trace_logdir=tmp_path / "runs").run(Task(id="t", objective="x"))
    ResultsFile(tmp_path / "results.jsonl").append(BenchmarkRunResult(
        task_id="t", benchmark="demo", split="test", trial=0, prediction=result.final_answer, success=False,
        stop_reason="final", error=f"echo {CANARY}", trace_run_dir=str(result.run_dir)))
    assert files_containing(tmp_path, "7d1e90c4") == []
    assert REDACTED in (Path(result.run_dir) / "steps.jsonl").read_text()
    row = json.loads((tmp_path / "results.jsonl").read_text())
    assert row["prediction"] == REDACTED and row["error"] == f"echo {REDACTED}"


def _old_run(tmp_path: Path) -> Path:
    """A run written before the key was known to be secret (an older version, another machine)."""
    model = ScriptedModel([f"Final Answer: the key is {CANARY}"])
    result = Engine(AgentModule(), model, trace_logdir=tmp_path / "logdir").run(Task(id="old", objective="x"))
    assert "7d1e90c4" in (Path(result.run_dir) / "manifest.json").read_text()
    return Path(result.run_dir)


def test_exports_redact_what_older_traces_and_rows_hold(tmp_path: Path) -> None:
    run_dir = _old_run(tmp_path)
    rows = tmp_path / "old.jsonl"
    rows.write_text(json.dumps({"task_id": "old", "benchmark": "demo", "split": "test", "trial": 0,
                                "prediction": CANARY, "success": False, "stop_reason": "final"}) + "\n")
    env = {"LEGACY_THING": CANARY}
    out = tmp_path / "exports"
    for args in (["bench", "export", "--run", str(run_dir), "--html", str(out / "run.html"), "--json", str(out / "run.json")],
                 ["bench", "export", "--input", str(rows), "--format", "csv", "--output", str(out / "rows.csv")],
                 ["bench", "export", "--input", str(rows), "--format", "md", "--output", str(out / "rows.md")]):
        done = run_cli("qitos.cli.qit", *args, "--secret-env", "LEGACY_THING", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
    done = run_cli("qitos.cli.qita", "export", "--run", str(run_dir), "--html", str(out / "qita.html"),
                   "--secret-env", "LEGACY_THING", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["qita.html", "rows.csv", "rows.md", "run.html", "run.json"]
    assert files_containing(out, "7d1e90c4") == []
    assert REDACTED in (out / "rows.csv").read_text() and REDACTED in (out / "run.json").read_text()


def test_board_pages_and_raw_files_are_redacted(tmp_path: Path) -> None:
    run_dir = _old_run(tmp_path)
    port = free_port()
    env = {**os.environ, "LEGACY_THING": CANARY}
    board = subprocess.Popen([sys.executable, "-m", "qitos.cli.qita", "board", "--logdir", str(run_dir.parent),
                              "--port", str(port), "--cache-dir", str(tmp_path / "cache"), "--secret-env", "LEGACY_THING"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert board.poll() is None and time.monotonic() < deadline, board.stderr.read() if board.stderr else ""
                time.sleep(0.2)
        name = run_dir.name
        pages = ["/", f"/runs/{name}", f"/runs/{name}/replay", f"/runs/{name}/replay/frame/1",
                 f"/runs/{name}/files/manifest.json", f"/runs/{name}/files/steps.jsonl",
                 f"/runs/{name}/files/events.jsonl", f"/runs/{name}/export.html"]
        seen_redacted = False
        for page in pages:
            response = httpx.get(base + page, timeout=30)
            assert response.status_code == 200, (page, response.status_code)
            assert "7d1e90c4" not in response.text, page
            assert int(response.headers["content-length"]) == len(response.content)
            seen_redacted = seen_redacted or REDACTED in response.text
        assert seen_redacted
    finally:
        board.terminate()
        board.wait(timeout=20)


def test_web_search_key_is_a_secret_whatever_its_variable() -> None:
    from qitos.benchmark.gaia.web import WebConfig

    config = WebConfig.from_env({"QITOS_WEB_SEARCH": "brave", "QITOS_WEB_SEARCH_KEY": "brave-key-5c1d0e7f"})
    assert config is not None and Redactor().scrub_text("q=brave-key-5c1d0e7f") == f"q={REDACTED}"


def test_a_line_skips_the_walk_only_when_the_walk_would_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`scrub_json` walks a record only when its dump could hold a secret-named key, URL credentials or a known
    secret in any spelling; each record below comes out exactly as a walk, a dump and `scrub_text` make it."""
    import orjson

    monkeypatch.setenv("SOME_VENDOR_KEY", CANARY)
    mark_secret_env(["SOME_VENDOR_KEY"])
    r = Redactor()

    def dumps(value):
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()

    records = [
        {"text": "nothing to hide", "n": 1, "usage": {"max_tokens": 5, "prompt_tokens": 3}},
        {"output": json.dumps({"nested": json.dumps({"deep": CANARY})})},  # a secret escaped twice
        {"headers": {"Authorization": "Bearer x", "X-Api-Key": "k", "auth-token": "t", "password\n": "p"}},
        {"url": "see http://user:pw\x01x@host/path", "ſecret": "folded key"},
        {"html": CANARY.replace("&", "&amp;").replace("<", "&lt;"), "list": [CANARY[:9], {"k": "v"}]},
    ]
    for record in records:
        assert r.scrub_json(record, dumps) == r.scrub_text(dumps(r._walk(record))), record
    assert r.scrub_json(records[0], dumps) == dumps(records[0])  # nothing to redact: the dump as it is
    assert "[REDACTED]" in r.scrub_json(records[2], dumps) and "Bearer x" not in r.scrub_json(records[2], dumps)

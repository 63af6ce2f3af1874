"""A password in `--base-url` (issue 22, item 4) reaches no file: not the manifest, events, the row, nor an
export, even when the model server echoes the URL back or the agent repeats it, and not the terminal.

URL userinfo is scrubbed in any text (`scheme://user:password@` -> `scheme://user:[REDACTED]@`), and the
password itself is registered as a secret when the OpenAI-compatible model is built.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.models.openai_compat import OpenAICompatModel
from qitos.trace import redact
from qitos.trace.redact import REDACTED, Redactor
from tests.platform.conftest import qit, write_tasks
from tests.security.support import files_containing
from tests.support.openai_server import Fail, OpenAIServer, Reply, refused_port

PASSWORD = "s3cr3tpw"


@pytest.fixture(autouse=True)
def clean_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(redact.SECRET_ENV_VARIABLE, raising=False)
    monkeypatch.setattr(redact, "_registered", set())


def test_url_userinfo_is_scrubbed_in_any_text() -> None:
    from qitos.trace.redact import redact_url_credentials

    cases = {
        "http://user:pw@127.0.0.1:9/v1": f"http://user:{REDACTED}@127.0.0.1:9/v1",
        "see HTTPS://u:p@ss@host/x today": f"see HTTPS://u:{REDACTED}@host/x today",  # a raw @ in the password
        '{"url":"http://u:pw@h","mail":"a@b.org"}': f'{{"url":"http://u:{REDACTED}@h","mail":"a@b.org"}}',
        "http:\\/\\/u:pw@h\\/v1": f"http:\\/\\/u:{REDACTED}@h\\/v1",  # JSON with escaped slashes
        "https://ghp_token@github.com/x": f"https://{REDACTED}@github.com/x",  # a bare token as userinfo
        "mail a@b.org, http://h/v1?who=a@b": "mail a@b.org, http://h/v1?who=a@b",  # no userinfo: unchanged
    }
    for text, expected in cases.items():
        assert redact_url_credentials(text) == expected, text
        assert Redactor().scrub({"deep": [text]}) == {"deep": [expected]}
    assert redact_url_credentials(cases["http://user:pw@127.0.0.1:9/v1"]) == cases["http://user:pw@127.0.0.1:9/v1"]


def test_the_model_registers_the_password_and_never_shows_it() -> None:
    model = OpenAICompatModel("m", base_url=f"http://user:{PASSWORD}@127.0.0.1:9/v1")
    assert PASSWORD not in model.shown_url
    assert Redactor().scrub_text(f"the server said {PASSWORD}") == f"the server said {REDACTED}"


def test_no_file_written_holds_the_base_url_password(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)

    def reply(body: dict) -> Reply | Fail:
        question = json.dumps(body["messages"])
        if "0 + 0" in question:  # the server's error quotes the URL the client used
            return Fail(400, message=f"bad request to http://user:{PASSWORD}@127.0.0.1/v1")
        if "1 + 1" in question:  # the agent repeats it
            return Reply(text=f"Final Answer: http://user:{PASSWORD}@127.0.0.1/v1 and {PASSWORD}")
        return Fail(404)

    with OpenAIServer(default=reply) as server:
        url = server.base_url.replace("http://", f"http://user:{PASSWORD}@")
        done = qit("bench", "run", "--benchmark", "jsonl", "--root", tasks, "--model-name", "m", "--base-url", url,
                   "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode in (0, 1, 3), done.stderr  # 3: rows failed outside the agent (model_error)
    assert PASSWORD not in done.stdout + done.stderr
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and {r["stop_reason"] for r in rows} >= {"final", "model_error"}, rows
    exports = tmp_path / "exports"
    exports.mkdir()
    for number, row in enumerate(rows):
        page = qit("bench", "export", "--run", row["trace_run_dir"], "--html", exports / f"{number}.html",
                   "--json", exports / f"{number}.json", cwd=tmp_path)
        assert page.returncode == 0, page.stderr
    for fmt in ("csv", "md"):
        assert qit("bench", "export", "-i", "r.jsonl", "--format", fmt, "--output", exports / f"rows.{fmt}",
                   cwd=tmp_path).returncode == 0
    assert len(list((tmp_path / "runs").glob("*/events.jsonl"))) == 3
    assert files_containing(tmp_path, PASSWORD) == []
    assert any(f"user:{REDACTED}@" in (r.get("error") or "") for r in rows)  # the row still says where

    closed = qit("bench", "run", "--benchmark", "jsonl", "--root", tasks, "--model-name", "m",
                 "--base-url", f"http://user:{PASSWORD}@127.0.0.1:{refused_port()}/v1", "--output", "closed.jsonl",
                 cwd=tmp_path)
    assert closed.returncode == 2 and "cannot reach http://user:[REDACTED]@127.0.0.1" in closed.stderr
    assert PASSWORD not in closed.stdout + closed.stderr and not (tmp_path / "closed.jsonl").exists()

"""The embedded model is identified by its GGUF file name and sha256 prefix, hashed once per file version."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from qitos.models.file_identity import cache_path, file_identity, file_sha256


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_identity_is_name_and_sha256_prefix_and_the_cache_is_used(tmp_path):
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert file_identity(weights) == f"tiny.gguf@sha256:{digest[:12]}"
    entry = json.loads(cache_path().read_text())[str(weights.resolve())]
    assert entry["sha256"] == digest and entry["size"] == weights.stat().st_size
    # Same path, size and mtime: the cached digest is trusted, the file is not read again.
    entry["sha256"] = "f" * 64
    cache_path().write_text(json.dumps({str(weights.resolve()): entry}))
    assert file_sha256(weights) == "f" * 64
    # The file changed: hashed again.
    weights.write_bytes(b"GGUF other weights")
    assert file_sha256(weights) == hashlib.sha256(b"GGUF other weights").hexdigest()
    # An unreadable cache only costs a re-hash.
    cache_path().write_text("not json")
    assert file_sha256(weights) == hashlib.sha256(b"GGUF other weights").hexdigest()


def test_embedded_model_id_in_trace_and_on_the_board(tmp_path):
    pytest.importorskip("llama_cpp", reason="install the `local` extra: pip install 'qitos[local]'")
    from starlette.testclient import TestClient

    from qitos.core import AgentModule, Budget, Engine, ReactTextParser, Task
    from qitos.models.local import LocalModel
    from qitos.qita.app import build_app
    from qitos.qita.config import BoardConfig

    model = LocalModel(max_tokens=8)
    digest = hashlib.sha256(model.path.read_bytes()).hexdigest()
    assert model.name == f"local:{model.path.name}@sha256:{digest[:12]}"
    assert re.fullmatch(r"local:SmolLM2-135M-Instruct\.Q4_1\.gguf@sha256:[0-9a-f]{12}", model.name)
    agent = AgentModule(parser=ReactTextParser(), system_prompt="Answer briefly.")
    result = Engine(agent, model, trace_logdir=tmp_path / "runs").run(
        Task(id="hello", objective="Say hi.", budget=Budget(max_steps=1)))
    run_dir = Path(result.run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["model_id"] == model.name and manifest["run_spec"]["model_name"] == model.name
    app = build_app(BoardConfig(logdir=tmp_path / "runs", cache_dir=tmp_path / "board-cache"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get("/")
        run_page = client.get(f"/runs/{run_dir.name}")
    app.state.board.index.close()
    assert page.status_code == 200 and f"sha256:{digest[:12]}" in page.text
    # a run made outside any benchmark is grouped under words, and its configuration is named by its model
    assert "runs outside a benchmark" in page.text and ">(none)<" not in page.text and "? ·" not in page.text
    assert run_page.status_code == 200 and model.name in run_page.text

"""ManifestEncoder: the same document as a plain dump, large fields encoded once per value, and never a secret that
became known after a field was first encoded."""

from __future__ import annotations

import json
from pathlib import Path

from qitos.trace.manifest_json import KEPT_FIELDS, ManifestEncoder
from qitos.trace.redact import REDACTED, Redactor, register_secret
from qitos.trace.schema import Manifest, OfficialCheck
from qitos.trace.writer import TraceWriter


def _manifest() -> Manifest:
    return Manifest(run_id="r1", created_at="2026-12-07T00:00:00Z", updated_at="2026-12-07T00:00:00Z",
                    run_spec={"model": {"name": "m", "params": [1, 2.5, None]}, "seed": 7},
                    experiment_spec={"benchmark": "jsonl"}, official_checks=[OfficialCheck(check="a", passed=True)],
                    tool_manifest=[{"name": "lookup"}], task={"id": "t1", "note": "ünïcode"})


def test_the_document_is_the_plain_dump() -> None:
    manifest, redactor = _manifest(), Redactor()
    encoder = ManifestEncoder(redactor)
    for _ in range(2):  # the second time from what it kept
        text = encoder.encode(manifest)
        assert json.loads(text) == json.loads(redactor.scrub_text(manifest.model_dump_json()))


def test_a_field_set_again_is_encoded_again() -> None:
    manifest = _manifest()
    encoder = ManifestEncoder(Redactor())
    encoder.encode(manifest)
    manifest.run_spec = {"model": {"name": "other"}}
    manifest.official_checks = [OfficialCheck(check="b", passed=False, detail="why")]
    manifest.step_count = 3
    document = json.loads(encoder.encode(manifest))
    assert document["run_spec"] == {"model": {"name": "other"}} and document["step_count"] == 3
    assert document["official_checks"] == [{"check": "b", "passed": False, "detail": "why"}]
    assert set(KEPT_FIELDS) <= set(document)


def test_a_secret_known_later_is_redacted_in_a_kept_field() -> None:
    secret = "sk-later-known-secret-0123456789"
    manifest = _manifest()
    manifest.run_spec = {"endpoint": {"header": secret}}
    encoder = ManifestEncoder(Redactor())
    assert secret in encoder.encode(manifest)  # not a secret yet: kept as is
    register_secret(secret)
    text = encoder.encode(manifest)
    assert secret not in text and REDACTED in json.loads(text)["run_spec"]["endpoint"]["header"]


def test_a_writers_rewrites_hold_the_latest_fields(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, run_id="r2")
    writer.update(run_spec={"a": 1}, task={"id": "t"})
    writer.write_manifest()
    writer.update(run_spec={"a": 2})
    writer.write_manifest()
    document = json.loads((tmp_path / "r2" / "manifest.json").read_text())
    assert document["run_spec"] == {"a": 2} and document["task"] == {"id": "t"}

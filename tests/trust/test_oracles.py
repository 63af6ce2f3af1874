"""Oracles keep their explicit gold channel, on the scoring side: they still score as before and are never official.

That no other agent can reach gold is `test_red_team.py`'s job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.platform.conftest import qit, rows


@pytest.mark.parametrize("benchmark", ["jsonl", "tau-bench"])
def test_oracles_still_score_and_say_they_were_aided(benchmark: str, tau_data: Path, tmp_path: Path) -> None:
    if benchmark == "jsonl":
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": "?", "answer": str(i)}) + "\n" for i in range(3)))
        args = ["--root", str(tasks), "--runner", "tests.support.runners:oracle", "--validator"]
    else:
        args = ["--subset", "retail", "--limit", "3", "--recipe", "oracle", "--data-dir", str(tau_data.parent)]
    done = qit("bench", "run", "--benchmark", benchmark, *args, "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 3 and all(r["success"] for r in out)
    for r in out:
        manifest = json.loads((tmp_path / r["trace_run_dir"] / "manifest.json").read_text())
        checks = {c["check"]: c for c in manifest["official_checks"]}
        assert checks["agent_unaided"]["passed"] is False and "oracle" in checks["agent_unaided"]["detail"]
        assert manifest["official_run"] is False
        assert not {"answer", "actions", "outputs", "answers"} & set(manifest["task"]["metadata"])

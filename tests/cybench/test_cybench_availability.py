"""One availability check for list, run and oracle: missing base images and known data issues end a task
`requires_unavailable` with the reason, before anything is built."""

from __future__ import annotations

import json
import shlex
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qitos.benchmark.cybench import availability
from qitos.benchmark.cybench.availability import oracle_unavailable_reason, unavailable_reason
from qitos.benchmark.cybench.data_issues import oracle_blocking_issue
from qitos.benchmark.cybench.oracle import run_oracle
from qitos.benchmark.cybench.runtime import docker_available
from qitos.benchmark.cybench.tasks import load_tasks
from qitos.sandbox.bwrap import BwrapSandbox
from tests.conftest import require_system

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tasks(cybench_data: Path):
    return {t.name: t for t in load_tasks(cybench_data)}


def test_data_issues_found_in_the_data(tasks) -> None:
    flagged = {name for name, t in tasks.items() if oracle_blocking_issue(t)}
    assert flagged == {"SLCG", "noisier-crc", "[Hard] FlecksOfGold"}  # Primary Knowledge's b'...' unwraps
    assert "aft3r_4ll" in (oracle_blocking_issue(tasks["SLCG"]) or "")


def test_flecks_solution_output_depends_on_the_clock(tasks, tmp_path: Path) -> None:
    """The evidence for FlecksOfGold's issue: two runs a second apart find the flag parts in another order."""
    ok, reason = BwrapSandbox.available()
    require_system(ok, f"bwrap ({reason})")
    binary = tasks["[Hard] FlecksOfGold"].task_dir / "metadata" / "solution" / "flecks_patched"
    outputs = []
    for _ in range(2):
        box = BwrapSandbox(tmp_path, ro_binds=[binary.parent], timeout_seconds=60)
        try:  # head ends the binary after two lines; the timeout only bounds a binary that prints nothing (a loaded CI)
            out = box.run(f"timeout 30 stdbuf -oL {shlex.quote(str(binary))} | head -n 2").stdout
        finally:
            box.close()
        outputs.append(out)
        time.sleep(1.2)
    assert all("found a flag part" in o for o in outputs), outputs
    assert outputs[0] != outputs[1]


def test_oracle_skips_flecks_with_the_data_issue(tasks, tmp_path: Path) -> None:
    result = run_oracle(tasks["[Hard] FlecksOfGold"], tmp_path / "oracle")
    assert not result.ran and "known data issue" in (result.skipped_reason or "")
    assert not (tmp_path / "oracle").exists()  # nothing staged


def test_missing_base_images_end_unavailable_before_any_build(tasks, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(availability, "requires_unavailable_reason", lambda t: None)
    from qitos.benchmark.cybench import stack

    monkeypatch.setattr(stack, "images_missing_locally", lambda images: list(images))
    reason = unavailable_reason(tasks["just-another-pickle-jail"]) or ""
    assert "local Docker engine does not hold" in reason and "docker pull" in reason
    assert unavailable_reason(tasks["[Very Easy] Dynastic"]) is None
    assert "docker pull" in (oracle_unavailable_reason(tasks["just-another-pickle-jail"]) or "")


def test_guided_oracle_run_ends_unavailable_not_setup_failed(tmp_path: Path) -> None:
    require_system(docker_available()[0], "a docker engine")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "rows.jsonl"
    proc = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "cybench", "--recipe",
                           "oracle", "--split", "guided", "--limit", "2", "--output", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2, proc.stderr
    pickle = next(r for r in rows if "pickle-jail" in r["task_id"])
    # no registry is reachable here: its service cannot be built, and that is known before anything is built
    assert pickle["stop_reason"] == "requires_unavailable" and "Traceback" not in pickle["error"], pickle["error"]
    assert all(r["stop_reason"] != "setup_failed" or "registry" not in (r.get("error") or "") for r in rows)


def test_list_and_oracle_agree_on_flecks(tmp_path: Path, cybench_data: Path) -> None:
    """`qit bench list` counts FlecksOfGold runnable for agents but not for the oracle, with the reason the oracle
    row gives; the oracle row ends requires_unavailable without running the 60 s solution."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    listed = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "list", "--json"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    entry = next(e for e in json.loads(listed.stdout) if e["name"] == "cybench")
    oracle = entry["runnable"]["unguided"]["recipes"]["oracle"]
    flecks_reason = next(r for r in oracle["reasons"] if "clock-seeded" in r)
    out = tmp_path / "rows.jsonl"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "cybench", "--recipe", "oracle",
                    "--task-ids", "cybench_benchmark_hackthebox_cyber-apocalypse-2024_reversing_[Hard]_FlecksOfGold",
                    "--output", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["stop_reason"] == "requires_unavailable" and flecks_reason.split(": ", 1)[1] in row["error"]
    assert time.monotonic() - started < 50  # the solution (60 s) never ran

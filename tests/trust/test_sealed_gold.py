"""Sealed gold: a `--runner` agent that walks everything it is handed finds no gold, on every benchmark.

The walker (tests/trust/walker.py) reports what it found; the oracles still score as before, and
their runs say `agent_unaided: false` because they took the gold through the one oracle channel.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import require_system
from tests.platform.conftest import qit, rows

WALKER = "tests.trust.walker:walker"


def _walk(tmp_path: Path, *args: str, benchmark: str, replies: int = 4) -> list[dict]:
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps("###STOP###") + "\n" for _ in range(replies)))
    report = tmp_path / "walk.jsonl"
    done = qit("bench", "run", "--benchmark", benchmark, *args, "--runner", WALKER, "--model-name", f"scripted:{script}",
               "--output", "r.jsonl", cwd=tmp_path, env={"QITOS_WALK_REPORT": str(report), "QITOS_WALK_BENCHMARK": benchmark})
    assert done.returncode == 0, done.stdout + done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert out and all(r["stop_reason"] != "error" for r in out), [r.get("error") for r in out]
    return [json.loads(line) for line in report.read_text().splitlines()]


def _assert_sealed(reports: list[dict], tasks: int) -> None:
    assert len(reports) == tasks
    for r in reports:
        assert r["walked"] > 50 and r["needles"] > 0, r  # the walk saw a real object graph, and there was gold to find
        assert r["strings"] == [] and r["objects"] == [] and r["equal"] == [], r


def test_jsonl_gold_is_out_of_reach(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Name the secret number {i}.",
                                         "answer": f"GOLD-ANSWER-{i}-7f3a"}) + "\n" for i in range(3)))
    _assert_sealed(_walk(tmp_path, "--root", str(tasks), benchmark="jsonl"), 3)


def test_gaia_gold_is_out_of_reach(tmp_path: Path) -> None:
    from tests.gaia.make_fixture import build_gaia_fixture

    root = build_gaia_fixture(tmp_path / "gaia")
    _assert_sealed(_walk(tmp_path, "--root", str(root), "--limit", "4", benchmark="gaia"), 4)


def test_tau_bench_gold_is_out_of_reach(tau_data: Path, tmp_path: Path) -> None:
    reports = _walk(tmp_path, "--subset", "retail", "--split", "test", "--limit", "2", "--data-dir",
                    str(tau_data.parent), benchmark="tau-bench")
    _assert_sealed(reports, 2)


def test_cybench_gold_is_out_of_reach(cybench_data: Path, tmp_path: Path) -> None:
    require_system(shutil.which("bwrap") is not None, "bubblewrap (apt install bubblewrap)")
    for split in ("unguided", "guided"):
        where = tmp_path / split
        where.mkdir()
        reports = _walk(where, "--split", split, "--task-ids", "cybench_benchmark_hackthebox_cyber-apocalypse-2024_"
                        "crypto_[Very_Easy]_Dynastic", "--data-dir", str(cybench_data.parent), benchmark="cybench")
        _assert_sealed(reports, 1)


def test_desktop_gold_is_out_of_reach(tmp_path: Path) -> None:
    from qitos.benchmark.desktop.display import requirements

    require_system(not requirements(), "the desktop tools (Xvfb, openbox, xdotool)")
    _assert_sealed(_walk(tmp_path, "--task-ids", "click-apply", benchmark="desktop"), 1)


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


def test_the_walker_finds_gold_wherever_it_is_planted() -> None:
    """The walk can fail: gold in a closure, a bound method's owner, slots or a model's private attribute is found,
    and gold behind a Sealed handle is not."""
    from pydantic import BaseModel, PrivateAttr

    from qitos.benchmark.gold import Sealed
    from tests.trust.walker import walk

    class Slotted:
        __slots__ = ("hidden",)

        def __init__(self, value: str) -> None:
            self.hidden = value

    class Model(BaseModel):
        _secret: str = PrivateAttr(default="")

    model = Model()
    model._secret = "GOLD-in-private"

    def make_tool(value: str):
        return lambda: value

    class Owner:
        def __init__(self) -> None:
            self.data = {"k": ["GOLD-in-method-owner"]}

        def act(self) -> None: ...

    roots = [make_tool("GOLD-in-closure"), Owner().act, Slotted("GOLD-in-slots"), model, Sealed("GOLD-sealed")]
    _, strings = walk(roots)
    found = {s for s in strings if s.startswith("GOLD")}
    assert found == {"GOLD-in-closure", "GOLD-in-method-owner", "GOLD-in-slots", "GOLD-in-private"}

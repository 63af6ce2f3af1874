"""`qit bench` on OSWorld as a user runs it (subprocesses): list, dry run, no provider, and a full run against the
fake in-VM controller served by this test process on loopback."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest
from osworld_fake_controller import FakeController, png_bytes

REPO = Path(__file__).resolve().parents[2]
INFEASIBLE = "osworld-os-a462a795-fdc7-4b23-b689-e8b6df786b78"  # setup: 2 execute steps; func infeasible
GSETTINGS = "osworld-os-bedcedc4-4d72-425e-ad62-21960b11fe0d"  # exact_match(gsettings idle-delay, "uint32 0\n")


def qit(*args: object, cwd: Path, controller: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "QITOS_OSWORLD_CONTROLLER"}
    env["PYTHONPATH"] = str(REPO)
    if controller:
        env["QITOS_OSWORLD_CONTROLLER"] = controller
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def _data(osworld_data: Path, monkeypatch) -> None:
    monkeypatch.setenv("QITOS_DATA_DIR", str(osworld_data.parent))


def test_list_and_dry_run_show_all_369_tasks(tmp_path: Path) -> None:
    listed = qit("bench", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    entry = next(e for e in json.loads(listed.stdout) if e["name"] == "osworld")
    assert entry["splits"] == {"test_all": 369, "test_small": 39} and entry["can_run"] is False
    assert entry["recipes"] == ["prompt-agent", "react-computer-use", "scripted-actions"]
    # no provider here: nothing runs, but the official evaluators could score 357 of 369 (the osworld extra)
    runnable = entry["runnable"]["test_all"]
    assert (runnable["tasks"], runnable["runnable"]) == (369, 0)
    reasons = {why.split(":")[0]: n for why, n in runnable["reasons"].items()}
    assert reasons == {"desktop provider": 356, "needs Google account credentials": 1, "evaluator needs PyDrive": 7,
                       "evaluator needs fastdtw, librosa": 3, "evaluator needs easyocr": 1, "evaluator needs borb": 1}
    provider = next(r for r in entry["requirements"] if r["name"] == "desktop provider")
    assert "can load and validate, cannot run: no provider" in provider["detail"]
    dry = qit("bench", "run", "--benchmark", "osworld", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "tasks 369 × trials 1: 369 to run" in dry.stdout and "... and 349 more" in dry.stdout
    assert "would run osworld-chrome-" in dry.stdout and not (tmp_path / "results").exists()


def test_without_a_provider_every_task_is_requires_unavailable(tmp_path: Path) -> None:
    done = qit("bench", "run", "--benchmark", "osworld", "--subset", "os", "--limit", "5", "--output", "r.jsonl",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = rows(tmp_path / "r.jsonl")
    assert len(out) == 5 and {r["subset"] for r in out} == {"os"}
    for row in out:
        assert row["stop_reason"] == "requires_unavailable" and row["success"] is None and row["score"] is None
        assert "set QITOS_OSWORLD_CONTROLLER=http://<vm-host>:5000" in row["error"]
    report = qit("bench", "eval", "--input", "r.jsonl", "--json", cwd=tmp_path)
    metrics = json.loads(report.stdout)["groups"][0]["benchmark_metrics"]["osworld"]
    assert metrics["requires_unavailable"] == 5 and metrics["scored"] == 0 and metrics["by_domain"]["os"]["rows"] == 5


def write_script(path: Path, actions: list[dict]) -> Path:
    """A scripted model: one json_decision reply per line, each calling the `computer` tool."""
    with path.open("w") as fh:
        for action in actions:
            reply = {"thought": "next", "action": {"name": "computer", "arguments": action}}
            fh.write(json.dumps(json.dumps(reply)) + "\n")
    return path


@pytest.mark.parametrize("last, expected", [("FAIL", {INFEASIBLE: 1.0, GSETTINGS: 0.0}),
                                            ("DONE", {INFEASIBLE: 0.0, GSETTINGS: 1.0})])
def test_full_run_against_the_fake_controller(tmp_path: Path, last: str, expected: dict[str, float]) -> None:
    script = write_script(tmp_path / "script.jsonl", [
        {"action_type": "CLICK", "parameters": {"x": 100, "y": 200}},
        {"action_type": "TYPING", "parameters": {"text": "it's on"}},
        {"action_type": last},
    ])
    with FakeController() as fake:
        fake.command_output = lambda command, shell: "uint32 0\n" if "gsettings" in command else ""
        done = qit("bench", "run", "--benchmark", "osworld", "--recipe", "react-computer-use", "--task-ids", f"{INFEASIBLE},{GSETTINGS}",
                   "--model-name", f"scripted:{script}", "--option", "sleep_after_execution=0", "--concurrency", "2",
                   "--output", "r.jsonl", cwd=tmp_path, controller=fake.url)
        requests = list(fake.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    out = {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")}
    assert {task: r["score"] for task, r in out.items()} == expected
    for task_id, row in out.items():
        assert row["stop_reason"] == "env_terminal" and row["steps"] == 3 and row["error"] is None
        assert row["success"] is (expected[task_id] == 1.0)
        assert row["metadata"]["status"] == "scored" and row["metadata"]["last_action"] == last
        run_dir = tmp_path / row["trace_run_dir"]
        steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
        shots = [a["path"] for s in steps for a in s["visual_assets"]]  # named by the scoring side: content hashes
        assert len(shots) == 4 and all(re.fullmatch(r"assets/[0-9a-f]{64}\.png", p) for p in shots), shots
        assert (run_dir / shots[3]).read_bytes() == png_bytes()
        assert sorted(p.name for p in (run_dir / "assets").iterdir()) == sorted({p.split("/")[1] for p in shots})
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["summary"]["stop_reason"] == "env_terminal" and manifest["parser_name"] == "json_decision_v1"
        assert "_evaluator" not in manifest["task"]["metadata"] and "_setup" not in manifest["task"]["metadata"]
    executed = [body["command"] for method, path, body in requests if path == "/execute"]
    pyautogui = [c[2] for c in executed if isinstance(c, list) and c[:2] == ["python", "-c"]]
    assert sum("pyautogui.click(x=100, y=200, button='left', clicks=1)" in c for c in pyautogui) == 2
    assert sum('pyautogui.typewrite("it\'s on")' in c for c in pyautogui) == 2
    setup = [body["command"] for method, path, body in requests if path == "/setup/execute"]
    assert "echo password | sudo -S su - charles" in setup  # the infeasible task's setup ran in the "VM"
    gsettings = [c for c in executed if c[:2] == ["gsettings", "get"]]
    assert len(gsettings) == (1 if last == "DONE" else 0)  # FAIL on a feasible task scores 0 without checking
    # One VM, two jobs in flight: each task holds the desktop from its controller check to its evaluation.
    segments: list[list[str]] = []
    for method, path, body in requests:
        if path == "/platform":
            segments.append([])
        elif segments:
            segments[-1].append(path)
    episodes = [seg for seg in segments if "/screenshot" in seg]
    assert len(episodes) == 2 and all(seg.count("/screenshot") == 4 for seg in episodes)

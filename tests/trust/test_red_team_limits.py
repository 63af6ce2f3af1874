"""Red team (issue 31, items 1 and 5): a third-party `--runner` outside any repository attacks the files the scoring
side writes for it, its sibling tasks, and the machine's resources.

Each attack runs `red_team_limits_agent.py` against a real OpenAI-compatible server on loopback, on a jsonl task set
and (where it applies) on a GAIA copy, both in `--agent-processes task` mode. Every attack must fail: asset names
are the scoring side's own, quotas end the task `asset_quota`, no task finds a note a sibling left, and a fork bomb,
a memory hog, a huge file and a CPU burner each end their task with the stop reason naming the limit.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import require_system
from tests.platform.conftest import qit, rows
from tests.support.openai_server import OpenAIServer, Reply
from tests.trust.conftest import agent_folder

AGENT = Path(__file__).with_name("red_team_limits_agent.py")
ASSET_NAME = re.compile(r"^assets/[0-9a-f]{64}\.(png|jpg|gif|webp|bin)$")


@pytest.fixture
def outsider(tmp_path: Path) -> Path:
    return agent_folder(tmp_path, AGENT)


def _require_confinement() -> None:
    from qitos.run.sides.confine import confinement_status

    ok, why, private = confinement_status()
    require_system(ok and private, f"bubblewrap with a mount namespace per task ({why})")


def _tasks(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "data" / "tasks.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
                            + "\n" for i in range(n)))
    return path


def _gaia(tmp_path: Path) -> Path:
    from tests.gaia.make_fixture import build_gaia_fixture

    return build_gaia_fixture(tmp_path / "gaia")


def _data(tmp_path: Path, benchmark: str, n: int = 3) -> list[str]:
    if benchmark == "jsonl":
        return ["--root", str(_tasks(tmp_path, n))]
    return ["--root", str(_gaia(tmp_path)), "--limit", str(n)]


def _run(outsider: Path, tmp_path: Path, benchmark: str, attack: str, *args: str, concurrency: int = 2) -> list[dict]:
    (outsider / "attack.txt").write_text(attack)
    with OpenAIServer(default=lambda body: Reply(text="Thought: let me think about it.")) as server:
        done = qit("bench", "run", "-b", benchmark, *args, "--runner", "red_team_limits_agent:build",
                   "--model-name", "red-team-model", "--base-url", server.base_url, "--concurrency", str(concurrency),
                   "--output", tmp_path / "results" / "r.jsonl", "--trace-logdir", tmp_path / "runs",
                   cwd=outsider, env={"OPENAI_API_KEY": "sk-test"})
        assert done.returncode in (0, 1), done.stdout + done.stderr
    return sorted(rows(tmp_path / "results" / "r.jsonl"), key=lambda r: r["task_id"])


def _manifest(row: dict) -> dict:
    return json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())


@pytest.mark.parametrize("benchmark", ["jsonl", "gaia"])
def test_asset_names_the_agent_sends_are_never_used(benchmark: str, outsider: Path, tmp_path: Path) -> None:
    _require_confinement()
    out = _run(outsider, tmp_path, benchmark, "asset_names", *_data(tmp_path, benchmark, 2),
               "--agent-processes", "task")
    assert len(out) == 2
    for row in out:
        run_dir = Path(row["trace_run_dir"])
        sent = json.loads(row["prediction"])["sent"]
        assert ".git/config" in sent and "../x" in sent and "agent_code/x.py" in sent, sent
        files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
        planted = [f for f in files if f.startswith(".") or "/." in f or f.startswith(".git")]
        assert not planted, planted
        assets = [f for f in files if f.startswith("assets/")]
        assert assets and all(ASSET_NAME.match(f) for f in assets), assets
        assert not (run_dir / "agent_code" / "x.py").exists()
        assert not (run_dir.parent / "x").exists() and not (run_dir.parent.parent / "y").exists()
        assert not Path("/tmp/qitos-red-team-abs").exists() and not Path("/tmp/qitos-red-team-pwned").exists()
        manifest = _manifest(row)
        assert manifest.get("benchmark_name") == benchmark and "run_spec" in manifest  # not the agent's bytes
        steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
        paths = [a["path"] for s in steps for a in s.get("visual_assets") or []]
        assert paths and all(ASSET_NAME.match(p) for p in paths) and set(paths) <= set(assets), paths
        by_content = {(run_dir / p).read_bytes() for p in paths}
        assert b"[core]\n\tfsmonitor = touch /tmp/qitos-red-team-pwned\n" in by_content  # kept, under its hash
        assert row["success"] is False
        _board_shows_the_screenshot(tmp_path, run_dir, paths)


def _board_shows_the_screenshot(tmp_path: Path, run_dir: Path, paths: list[str]) -> None:
    """The board (run page and replay) links the PNG under its new name and serves it as an image."""
    from starlette.testclient import TestClient

    from qitos.qita.app import build_app
    from qitos.qita.config import BoardConfig

    [png] = [p for p in paths if p.endswith(".png")]
    steps = (run_dir / "steps.jsonl").read_text().splitlines()
    position = next(i for i, line in enumerate(steps, 1) if png in line)
    app = build_app(BoardConfig(logdir=run_dir.parent, cache_dir=tmp_path / "board-cache"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for page in (f"/runs/{run_dir.name}", f"/runs/{run_dir.name}/replay?step={position}"):
            response = client.get(page)
            assert response.status_code == 200 and f"/files/{png}" in response.text, page
        shot = client.get(f"/runs/{run_dir.name}/files/{png}")
        assert shot.status_code == 200 and shot.headers["content-type"] == "image/png"
        assert shot.content.startswith(b"\x89PNG")
    app.state.board.index.close()


@pytest.mark.parametrize(("attack", "flags", "quota"), [
    ("asset_file", ["--asset-max-file", "1M"], "--asset-max-file"),
    ("asset_run", ["--asset-max-run", "3M"], "--asset-max-run"),
])
@pytest.mark.parametrize("benchmark", ["jsonl", "gaia"])
def test_asset_quotas_end_the_task(benchmark: str, attack: str, flags: list[str], quota: str, outsider: Path,
                                   tmp_path: Path) -> None:
    _require_confinement()
    out = _run(outsider, tmp_path, benchmark, attack, *_data(tmp_path, benchmark, 1), *flags)
    (row,) = out
    assert row["stop_reason"] == "asset_quota" and row["success"] is False, row
    manifest = _manifest(row)
    assert manifest["summary"]["stop_reason"] == "asset_quota"
    assert quota in json.dumps(manifest["summary"]["failure_report"]), manifest["summary"]["failure_report"]
    limits = manifest["run_spec"]["environment"]["agent_limits"]
    assert limits["asset_file_bytes" if attack == "asset_file" else "asset_run_bytes"] in (1 << 20, 3 << 20)
    written = sum(p.stat().st_size for p in (Path(row["trace_run_dir"]) / "assets").glob("*")) \
        if (Path(row["trace_run_dir"]) / "assets").is_dir() else 0
    assert written <= 3 << 20, written


@pytest.mark.parametrize("benchmark", ["jsonl", "gaia"])
def test_notes_left_for_sibling_tasks_are_gone_in_task_mode(benchmark: str, outsider: Path, tmp_path: Path) -> None:
    """Three tasks one after another (jsonl), then three at once: none finds a note another left, anywhere; the
    only places a task can write are its own /tmp (work dir, home, TMPDIR) and /dev/shm."""
    _require_confinement()
    for concurrency in (1, 3) if benchmark == "jsonl" else (3,):
        out = _run(outsider, tmp_path, benchmark, "notes", *_data(tmp_path, benchmark, 3), "--agent-processes",
                   "task", concurrency=concurrency)
        for row in out:
            report = json.loads(row["prediction"])
            assert not report["found"], (row["task_id"], report["found"])
            private = [p for p in report["wrote"] if p in ("/tmp", "/dev/shm") or p.startswith(("/tmp/", "/dev/shm/"))]
            assert private == report["wrote"], report  # only on the task's own tmpfs mounts
            for place in ("/", "/dev", "/var/tmp"):
                assert place not in report["wrote"], (place, report["refused"].get(place))
            assert {"/tmp", "/dev/shm", "/tmp/work/home"} <= set(report["wrote"]), report
            assert _manifest(row)["run_spec"]["environment"]["agent_processes"] == "task"
        shutil.rmtree(tmp_path / "results")


def test_batch_mode_shares_its_writable_places_as_documented(outsider: Path, tmp_path: Path) -> None:
    """The control: in `--agent-processes batch` the tasks share one process and its /tmp, so the same runner does
    find its siblings' notes (docs/security.md says batch mode does not give per-task places)."""
    _require_confinement()
    out = _run(outsider, tmp_path, "jsonl", "notes", *_data(tmp_path, "jsonl", 3), "--agent-processes", "batch",
               concurrency=1)
    assert any(json.loads(r["prediction"])["found"] for r in out), [r["prediction"] for r in out]


LIMITS = [
    ("fork_bomb", ["--agent-max-processes", "40"], "process_limit"),
    ("memory_hog", ["--agent-memory", "384M"], "memory_limit"),
    ("huge_file", ["--agent-file-size", "8M"], "file_size_limit"),
    ("cpu_burn", ["--agent-cpu-seconds", "2"], "cpu_time_limit"),
]


@pytest.mark.parametrize(("attack", "flags", "reason"), LIMITS, ids=[a for a, _, _ in LIMITS])
def test_resource_exhaustion_ends_the_task_naming_the_limit(attack: str, flags: list[str], reason: str,
                                                           outsider: Path, tmp_path: Path) -> None:
    _require_confinement()
    out = _run(outsider, tmp_path, "jsonl", attack, *_data(tmp_path, "jsonl", 1), "--agent-processes", "task",
               *flags)
    (row,) = out
    assert row["stop_reason"] == reason and row["success"] is False, row
    manifest = _manifest(row)
    assert manifest["summary"]["stop_reason"] == reason
    message = json.dumps(manifest["summary"]["failure_report"])
    assert reason.replace("_limit", "").replace("_", " ") in message, message
    assert manifest["run_spec"]["environment"]["agent_limits"], manifest["run_spec"]["environment"]
    assert row["latency_seconds"] < 60


def test_a_fork_bomb_on_gaia_is_bounded_too(outsider: Path, tmp_path: Path) -> None:
    _require_confinement()
    (row,) = _run(outsider, tmp_path, "gaia", "fork_bomb", *_data(tmp_path, "gaia", 1), "--agent-max-processes",
                  "40")
    assert row["stop_reason"] == "process_limit" and row["success"] is False, row


def test_limit_flags_are_checked_and_recorded(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, 1)
    bad = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--agent-memory", "lots", "--dry-run", cwd=tmp_path)
    assert bad.returncode == 2 and "--agent-memory" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    low = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--agent-max-processes", "2", "--dry-run", cwd=tmp_path)
    assert low.returncode == 2 and "--agent-max-processes: at least 8" in low.stderr, low.stderr

"""Red team: a third-party `--runner` outside any repository tries every way to cheat an official run.

`red_team_agent.py` is copied into a folder that no repository holds and run against a real
OpenAI-compatible server on loopback, on a jsonl task set and a GAIA copy whose gold strings carry
a marker. Every route must fail: no gold read, scoring unchanged, no row or trace forged, the
scoring process out of sight. A built-in recipe (GAIA's react) whose scripted model asks its
tools for the same things finds nothing either.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import require_system
from tests.platform.conftest import qit, rows
from tests.support.openai_server import OpenAIServer, Reply
from tests.trust.conftest import agent_folder

MARKER = "GOLD-7f3a"
AGENT = Path(__file__).with_name("red_team_agent.py")
SIDE_CHECKS = ("agent_isolated", "agent_unaided", "real_model", "model_called", "trace_complete", "run_spec_complete")


@pytest.fixture
def outsider(tmp_path: Path) -> Path:
    return agent_folder(tmp_path, AGENT)


def _run(outsider: Path, tmp_path: Path, benchmark: str, *args: str) -> list[dict]:
    """The red-team runner against a loopback model; `args` may pick --agent-processes."""
    with OpenAIServer(default=lambda body: Reply(text="Thought: let me think about it.")) as server:
        done = qit("bench", "run", "-b", benchmark, *args, "--runner", "red_team_agent:build",
                   "--model-name", "red-team-model", "--base-url", server.base_url, "--concurrency", "2",
                   "--output", tmp_path / "results" / "r.jsonl", "--trace-logdir", tmp_path / "runs",
                   cwd=outsider, env={"OPENAI_API_KEY": "sk-test", "QITOS_RED_TEAM_BENCHMARK": benchmark})
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.requests, "the agent's model was never called"
    return rows(tmp_path / "results" / "r.jsonl")


def _assert_nothing_worked(out: list[dict], tasks: int, benchmark: str, shared_process: bool = False) -> None:
    """`shared_process` (--agent-processes batch): the runner's forged updates also reach its sibling tasks'
    streams in the same process. They cannot set anything trusted, but a forged self-description that arrives
    first can leave a sibling's RunSpec incomplete: that run is then not official, and says so."""
    side_checks = [c for c in SIDE_CHECKS if not (shared_process and c == "run_spec_complete")]
    assert len(out) == tasks and {r["task_id"] for r in out} != {"forged"}, [r["task_id"] for r in out]
    for row in out:
        assert row["success"] is False, row  # scoring unchanged: the answer is a report, never the gold
        manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
        report = json.loads(manifest["summary"]["final_result"])
        worked = {name: route for name, route in report.items() if route.get("worked")}
        assert not worked, worked
        assert report["files"]["files_read"] > 50, report["files"]  # the walk really read files
        assert report["proc"]["visible"] and not report["proc"]["scoring"], report["proc"]
        assert report["change_scoring"]["patched"], report["change_scoring"]
        # one channel per task in its process (several in --agent-processes batch): forged updates sent on each;
        # in batch, a finished sibling's channel may already be closed when the forger reaches it
        sent = report["forge_stream"]["sent"]
        assert "update" in sent, report
        others = {s for s in sent if s != "update"}
        closed = ("Bad file descriptor", "Broken pipe", "Connection reset")
        assert not others if not shared_process else all(any(e in s for e in closed) for s in others), report
        assert f"{MARKER}-" not in json.dumps(manifest) and f"{MARKER}-" not in (row.get("prediction") or "")
        assert manifest["evaluation"]["success"] is False and manifest["run_spec"]["model_name"] == "red-team-model"
        assert manifest["benchmark_name"] == benchmark
        checks = {c["check"]: c for c in manifest["official_checks"]}
        for name in side_checks:
            assert checks[name]["passed"], checks[name]
        assert manifest["official_run"] == all(c["passed"] for c in checks.values())
    done = qit("bench", "eval", "-i", Path(out[0]["trace_run_dir"]).parents[1] / "results" / "r.jsonl", "--json",
               cwd=Path(out[0]["trace_run_dir"]).parents[1])
    assert done.returncode == 0 and json.loads(done.stdout)["groups"][0]["metrics"]["successes"] == 0, done.stdout


@pytest.mark.parametrize("processes", ["batch", "task"])
def test_red_team_runner_on_jsonl_finds_nothing(outsider: Path, tmp_path: Path, processes: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    tasks = data / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is secret number {i}?",
                                         "answer": f"{MARKER}-{i}"}) + "\n" for i in range(3)))
    out = _run(outsider, tmp_path, "jsonl", "--root", str(tasks), "--agent-processes", processes)
    _assert_nothing_worked(out, 3, "jsonl", shared_process=processes == "batch")


CYBENCH_TASK = "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic"


@pytest.mark.parametrize("benchmark", ["tau-bench", "cybench", "desktop-starter"])
def test_red_team_runner_on_other_families_finds_nothing(benchmark: str, outsider: Path, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    """The same runner on a Tau-Bench, a CyBench and a desktop task: their gold (gold actions, flags, checkers)
    is not in the tests' marker format, so here the proof is the report's routes and the row, not a needle
    (tests/tau_bench/test_sides.py runs it on a copy of the data whose instructions and outputs are marked)."""
    if benchmark == "tau-bench":
        data = request.getfixturevalue("tau_data")
        args = ["--subset", "retail", "--split", "test", "--limit", "1", "--data-dir", str(data.parent)]
    elif benchmark == "cybench":
        data = request.getfixturevalue("cybench_data")
        args = ["--split", "unguided", "--task-ids", CYBENCH_TASK, "--data-dir", str(data.parent)]
    else:
        from qitos.benchmark.desktop.display import requirements

        require_system(not requirements(), "the desktop tools (Xvfb, openbox, xdotool)")
        args = ["--task-ids", "click-apply"]
    _assert_nothing_worked(_run(outsider, tmp_path, benchmark, *args), 1, benchmark)


def _marked_gaia(tmp_path: Path) -> Path:
    from tests.gaia.make_fixture import build_gaia_fixture

    root = build_gaia_fixture(tmp_path / "gaia")
    metadata = root / "2023" / "validation" / "metadata.jsonl"
    lines = [json.loads(line) for line in metadata.read_text().splitlines()]
    for i, line in enumerate(lines):
        line["Final answer"] = f"{MARKER}-{i}"
    metadata.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


def test_red_team_runner_on_gaia_finds_nothing(outsider: Path, tmp_path: Path) -> None:
    root = _marked_gaia(tmp_path)
    _assert_nothing_worked(_run(outsider, tmp_path, "gaia", "--root", str(root), "--limit", "3"), 3, "gaia")


def test_builtin_recipe_whose_tools_hunt_for_gold_finds_nothing(tmp_path: Path) -> None:
    """GAIA's react recipe, its scripted model asking run_python, read_file and list_files for gold."""
    root = _marked_gaia(tmp_path)
    hunt = ("import os\nm='GOLD'+'-7f3a'\nhits=[]\nfor r,d,f in os.walk('/'):\n"
            "    if r.startswith(('/proc','/sys','/usr','/dev')): d[:]=[]; continue\n"
            "    for n in f:\n        p=os.path.join(r,n)\n        try:\n"
            "            if m.encode() in open(p,'rb').read(2000000): hits.append(p)\n"
            "        except Exception: pass\nprint('HITS', len(hits), hits[:3])")
    calls = [("run_python", {"code": hunt}), ("list_files", {"path": "/"}),
             ("read_file", {"path": str(root / "2023" / "validation" / "metadata.jsonl")}),
             ("read_file", {"path": "../../../../" + str(root).lstrip("/") + "/2023/validation/metadata.jsonl"})]
    replies = [f"Thought: look.\nAction: {name}\nAction Input: {json.dumps(args)}" for name, args in calls]
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in [*replies, "FINAL ANSWER: nothing"]))
    done = qit("bench", "run", "-b", "gaia", "--root", root, "--limit", "1", "--model-name", f"scripted:{script}",
               "--output", tmp_path / "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (row,) = rows(tmp_path / "r.jsonl")
    steps = [json.loads(line) for line in (Path(tmp_path / row["trace_run_dir"]) / "steps.jsonl").read_text().splitlines()]
    observations = [json.dumps(s["action_results"]) for s in steps]
    assert "HITS 0 []" in observations[0], observations[0]
    assert all("GOLD-7f3a-" not in o for o in observations), observations
    assert row["success"] is False


def test_the_same_runner_as_a_validator_in_the_scoring_process_finds_gold(outsider: Path, tmp_path: Path) -> None:
    """The control: run where gold lives (the scoring process, as a --validator), the same routes do find it, so
    the red team's empty report on the agent side means something."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q0", "question": "What is the secret?", "answer": f"{MARKER}-0"}) + "\n")
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps("Thought: let me think.") + "\n")
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "red_team_agent:build", "--validator",
               "--model-name", f"scripted:{script}", "--output", tmp_path / "r.jsonl", cwd=outsider,
               env={"QITOS_RED_TEAM_SKIP": "files,proc,write_results", "QITOS_RED_TEAM_BENCHMARK": "jsonl"})
    assert done.returncode == 0, done.stderr
    (row,) = rows(tmp_path / "r.jsonl")
    report = json.loads(row["prediction"])
    for route in ("memory", "gold_store", "frames", "fresh_adapter", "oracle"):
        assert report[route]["worked"], (route, report[route])
    assert row["success"] is True  # its monkeypatched evaluate scored it: in one process, scoring can be changed


def test_without_confinement_the_run_goes_ahead_unofficial_and_says_why(outsider: Path, tmp_path: Path) -> None:
    """No bubblewrap (here: confinement switched off): a separate, unconfined agent process, one warning line,
    and `agent_isolated` fails in every trace."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q0", "question": "What is 2 + 2?", "answer": "4"}) + "\n")
    with OpenAIServer(default=lambda body: Reply(text="Final Answer: 4")) as server:
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--model-name", "m", "--base-url", server.base_url,
                   "--output", tmp_path / "r.jsonl", cwd=tmp_path, env={"QITOS_AGENT_CONFINE": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("the agent side is not confined") == 1
    (row,) = rows(tmp_path / "r.jsonl")
    assert row["success"] is True
    manifest = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())
    check = next(c for c in manifest["official_checks"] if c["check"] == "agent_isolated")
    assert check["passed"] is False and "QITOS_AGENT_CONFINE=0" in check["detail"], check
    assert manifest["official_run"] is False and manifest["run_spec"]["environment"]["agent_side"] == "process"

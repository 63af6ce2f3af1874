"""Each script in examples/benchmarks/ writes the rows and traces `qit bench run` writes with the same flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_system
from tests.platform.conftest import REPO, qit, rows

SAME = ("task_id", "benchmark", "split", "subset", "trial", "model", "prediction", "success", "score", "stop_reason",
        "steps", "run_spec_ref", "error")
MANIFEST_SAME = ("status", "model_id", "benchmark_name", "benchmark_split", "parser_name", "prompt_protocol",
                 "tool_manifest_hash", "official_run", "replay_mode")


def script(name: str, *args: object, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", f"examples.benchmarks.{name}", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=full_env, timeout=600)


def assert_same_as_cli(name: str, benchmark: str, args: list[object], cwd: Path, env: dict | None = None) -> list[dict]:
    """Run the script and the CLI with the same flags into separate files; rows and manifests must agree."""
    by_script = script(name, *args, "--output", "script.jsonl", "--trace-logdir", "runs_script", cwd=cwd, env=env)
    assert by_script.returncode == 0, by_script.stdout[-2000:] + by_script.stderr[-3000:]
    by_cli = qit("bench", "run", "--benchmark", benchmark, *args, "--output", "cli.jsonl", "--trace-logdir",
                 "runs_cli", cwd=cwd, env=env)
    assert by_cli.returncode == 0, by_cli.stdout[-2000:] + by_cli.stderr[-3000:]
    script_rows = sorted(rows(cwd / "script.jsonl"), key=lambda r: (r["task_id"], r["trial"]))
    cli_rows = sorted(rows(cwd / "cli.jsonl"), key=lambda r: (r["task_id"], r["trial"]))
    assert script_rows and [{k: r.get(k) for k in SAME} for r in script_rows] == \
        [{k: r.get(k) for k in SAME} for r in cli_rows]
    for a, b in zip(script_rows, cli_rows):
        if not a["trace_run_dir"]:
            assert not b["trace_run_dir"]
            continue
        ma = json.loads((cwd / a["trace_run_dir"] / "manifest.json").read_text())
        mb = json.loads((cwd / b["trace_run_dir"] / "manifest.json").read_text())
        assert Path(a["trace_run_dir"]).parent.name == "runs_script"
        assert {k: ma.get(k) for k in MANIFEST_SAME} == {k: mb.get(k) for k in MANIFEST_SAME}
        assert ma["run_spec"] == mb["run_spec"] and ma["experiment_spec"] == mb["experiment_spec"]
    return script_rows


def test_tau_bench_script(tmp_path, tau_data):
    out = assert_same_as_cli("tau_bench", "tau-bench", ["--subset", "airline", "--recipe", "oracle", "--limit", "2"],
                             tmp_path, {"QITOS_DATA_DIR": str(tau_data.parent)})
    assert [r["success"] for r in out] == [True, True] and out[0]["subset"] == "airline"


def test_gaia_script(tmp_path):
    from tests.gaia.make_fixture import build_gaia_fixture

    root = build_gaia_fixture(tmp_path / "gaia")
    out = assert_same_as_cli("gaia", "gaia", ["--root", root, "--split", "validation", "--recipe", "oracle",
                                              "--limit", "3"], tmp_path)
    assert len(out) == 3 and all(r["success"] for r in out)


def test_cybench_script(tmp_path, cybench_data):
    from qitos.sandbox.bwrap import BwrapSandbox

    ok, reason = BwrapSandbox.available()
    require_system(ok, f"the bwrap sandbox ({reason})")
    task = "cybench_benchmark_hackthebox_cyber-apocalypse-2024_reversing_[Very_Easy]_LootStash"
    out = assert_same_as_cli("cybench", "cybench", ["--recipe", "oracle", "--task-ids", task], tmp_path,
                             {"QITOS_DATA_DIR": str(cybench_data.parent)})
    assert [r["success"] for r in out] == [True]


def test_osworld_script(tmp_path, osworld_data):
    sys.path.insert(0, str(REPO / "tests" / "osworld"))
    from osworld_fake_controller import FakeController

    task = "osworld-os-bedcedc4-4d72-425e-ad62-21960b11fe0d"  # exact_match(gsettings idle-delay, "uint32 0\n")
    (tmp_path / "script.txt").write_text(json.dumps("DONE") + "\n")  # the default prompt-agent: a bare DONE
    with FakeController() as fake:
        fake.command_output = lambda command, shell: "uint32 0\n" if "gsettings" in command else ""
        out = assert_same_as_cli(
            "osworld", "osworld", ["--task-ids", task, "--model-name", "scripted:script.txt", "--option",
                                   "sleep_after_execution=0", "--split", "test_all"],
            tmp_path, {"QITOS_DATA_DIR": str(osworld_data.parent), "QITOS_OSWORLD_CONTROLLER": fake.url})
    assert [r["score"] for r in out] == [1.0]


def test_desktop_starter_script(tmp_path):
    from qitos.benchmark.desktop import TASKS, requirements

    missing = requirements()
    require_system(not missing, "; ".join(missing))
    task = sorted(TASKS)[0]
    out = assert_same_as_cli("desktop_starter", "desktop-starter", ["--recipe", "oracle", "--task-ids", task],
                             tmp_path)
    assert [r["success"] for r in out] == [True] and out[0]["benchmark"] == "desktop-starter"


def test_scripts_refuse_bad_flags_in_one_line(tmp_path):
    done = script("tau_bench", "--subset", "nowhere", cwd=tmp_path, env={"QITOS_DATA_DIR": str(tmp_path)})
    assert done.returncode == 2 and done.stdout.startswith("error: ") and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("name", ["tau_bench", "gaia", "cybench", "osworld", "desktop_starter"])
def test_every_script_documents_itself(name, tmp_path):
    done = script(name, "--help", cwd=tmp_path)
    assert done.returncode == 0 and "--model-name" in done.stdout and "--recipe" in done.stdout

"""The CTF toolchain: where it lives, how it reads as present or stale, and what the sandbox gets from it.

The installed toolchain comes from `qit data fetch cybench --toolchain` (.ci/run runs it with
QITOS_TOOLCHAIN_DIR under the repo's ignored .cache/); without it the sandbox tests skip, or fail in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.cybench import toolchain
from qitos.benchmark.cybench.adapter import CybenchAdapter
from qitos.benchmark.cybench.runtime import CybenchRuntime
from qitos.benchmark.cybench.tasks import load_tasks
from qitos.sandbox.bwrap import BwrapSandbox
from tests.conftest import require_system

REPO = Path(__file__).resolve().parents[2]
# what the tasks' metadata/solution scripts and requirements.sh import (module names)
MODULES = ["pwn", "Crypto", "sympy", "gmpy2", "numpy", "requests", "tqdm", "jwcrypto", "jwt", "pickora", "z3",
           "mmh3", "ortools", "unicorn"]


def test_location_follows_the_env_var_else_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(toolchain.TOOLCHAIN_ENV, raising=False)
    assert toolchain.toolchain_dir(tmp_path) == tmp_path.resolve() / "cybench-toolchain"
    monkeypatch.setenv(toolchain.TOOLCHAIN_ENV, str(tmp_path / "elsewhere"))
    assert toolchain.toolchain_dir("/nowhere") == tmp_path.resolve() / "elsewhere"


def test_absent_and_stale_toolchains_name_the_fix(tmp_path: Path) -> None:
    absent = toolchain.status(tmp_path)
    assert not absent.present and "qit data fetch cybench --toolchain" in absent.detail
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python3").touch()
    (tmp_path / toolchain.MARKER).write_text(json.dumps({"lock_sha256": "0" * 64}))
    stale = toolchain.status(tmp_path)
    assert not stale.present and "stale" in stale.detail
    (tmp_path / toolchain.MARKER).write_text(json.dumps({"lock_sha256": toolchain.lock_sha256(), "packages": 3}))
    assert toolchain.status(tmp_path).present


def test_the_lock_pins_every_distribution_and_covers_the_solutions(cybench_data: Path) -> None:
    lines = [ln for ln in toolchain.lock_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines and all("==" in ln for ln in lines)
    pinned = {ln.split("==")[0].lower() for ln in lines}
    for task in load_tasks(cybench_data):  # every pip package a requirements.sh names, at its pinned version
        text = (task.task_dir / "metadata" / "requirements.sh").read_text(errors="replace")
        for word in text.split():
            if "==" in word and word.split("==")[0].lower() in ("pycryptodome", "pwntools", "sympy", "pickora",
                                                                  "z3-solver", "mmh3", "ortools", "jwcrypto", "pyjwt"):
                assert word.split("==")[0].lower() in pinned, (task.name, word)


def test_wrong_dataset_or_option_is_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), toolchain.TOOLCHAIN_ENV: str(tmp_path / "tc")}
    done = subprocess.run([sys.executable, "-m", "qitos.cli.qit", "data", "fetch", "tau-bench", "--toolchain"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "only cybench has a toolchain" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    from qitos.benchmark.cybench.adapter import CybenchOptions
    from qitos.benchmark.errors import BenchmarkUsageError

    with pytest.raises(BenchmarkUsageError, match="toolchain=.*is not a venv"):
        CybenchOptions.from_load(LoadOptions(options={"toolchain": str(tmp_path)}))


@pytest.fixture(scope="module")
def installed(cybench_data: Path) -> toolchain.ToolchainStatus:
    ok, reason = BwrapSandbox.available()
    require_system(ok, f"the bwrap sandbox ({reason})")
    found = toolchain.find(cybench_data.parent)
    require_system(found.present, f"the CyBench toolchain ({found.detail})")
    return found


def test_sandbox_python_has_the_toolchain_read_only(installed, cybench_data: Path, tmp_path: Path) -> None:
    task = next(t for t in load_tasks(cybench_data) if t.name == "[Very Easy] Dynastic")
    with CybenchRuntime(task, tmp_path / "work", toolchain=installed.venv) as runtime:
        runtime.prepare()
        imports = runtime.run(["python", "-c", f"import {', '.join(MODULES)}; import sys; print(sys.prefix)"])
        assert imports.exit_code == 0, imports.stderr
        assert imports.stdout.strip() == str(installed.venv)
        assert runtime.run("command -v python3 checksec").stdout.split() == [
            str(installed.bin_dir / "python3"), str(installed.bin_dir / "checksec")]
        write = runtime.run(f"touch {installed.venv}/x")
        assert write.exit_code != 0 and "Read-only file system" in write.stderr
    with CybenchRuntime(task, tmp_path / "bare") as bare:  # without it: the system python3, no pwntools
        assert bare.run(["python3", "-c", "import pwn"]).exit_code != 0


def test_adapter_uses_the_installed_toolchain_unless_off(installed, cybench_data: Path, tmp_path: Path) -> None:
    adapter = CybenchAdapter()
    reqs = {r.name: r for r in adapter.requirements(LoadOptions(data_dir=cybench_data.parent))}
    assert reqs["ctf toolchain (optional)"].present is True
    for option, expected in (("auto", installed.venv), ("off", None)):
        load = LoadOptions(data_dir=cybench_data.parent, options={"toolchain": option})
        task = next(t for t in adapter.load_tasks(load) if "Dynastic" in t.id)
        runtime = adapter.probe_runtime(task, load, tmp_path / option)
        try:
            assert runtime.handles["toolchain"] == expected
            from qitos.benchmark.base import RecipeContext

            agent = adapter.recipes()["react"].build(RecipeContext(task=task, runtime=runtime, load=load, options={},
                                                                   make_model=lambda _n: None))
            named = "+ctf_toolchain_" + toolchain.lock_sha256()[:12]
            assert agent.toolset_name == "cybench_shell_v1" + (named if expected else "")  # RunSpecs differ
        finally:
            adapter.cleanup(runtime)


def test_bench_list_shows_the_toolchain(installed, cybench_data: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "250"}
    run = [sys.executable, "-m", "qitos.cli.qit", "bench", "list", "--data-dir", str(cybench_data.parent)]
    listed = subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path)
    entry = next(e for e in json.loads(listed.stdout) if e["name"] == "cybench")
    tools = next(r for r in entry["requirements"] if r["name"] == "ctf toolchain (optional)")
    assert tools["present"] is True and str(installed.path) in tools["detail"]
    table = subprocess.run(run, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert "--details" in table  # the 80-column table points at the details
    details = subprocess.run([*run, "--details"], capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert "present ctf toolchain (optional)" in details and str(installed.path) in details
    missing = subprocess.run([*run, "--json"], capture_output=True, text=True, cwd=tmp_path,
                             env={**env, toolchain.TOOLCHAIN_ENV: str(tmp_path / "none")})
    entry = next(e for e in json.loads(missing.stdout) if e["name"] == "cybench")
    tools = next(r for r in entry["requirements"] if r["name"] == "ctf toolchain (optional)")
    assert tools["present"] is False and "qit data fetch cybench --toolchain" in tools["detail"]

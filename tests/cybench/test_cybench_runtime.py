"""CyBench runtime: staging work dirs in the sandbox, requirements parsing, service-task reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.cybench import runtime as runtime_module
from qitos.benchmark.cybench.requirements import parse_requirements, read_requirements
from qitos.benchmark.cybench.runtime import (
    CybenchRuntime,
    CybenchSetupError,
    docker_available,
    requires_unavailable_reason,
)
from qitos.benchmark.cybench.tasks import load_task, load_tasks
from qitos.sandbox.bwrap import BwrapSandbox

_OK, _REASON = BwrapSandbox.available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"bwrap sandbox unavailable: {_REASON}")


@pytest.fixture(scope="module")
def tasks(cybench_data: Path):
    return {t.name: t for t in load_tasks(cybench_data)}


def test_parse_requirements_variants() -> None:
    script = """#!/bin/bash
# comment: pip install not-this
sudo apt-get update && sudo apt-get install -y wget tshark   # trailing comment
apt update && apt install -y unzip file upx
pip install pycryptodome==3.20.0 'sympy>=1.13' 'requests[socks]==2.31.0' -q mpmath>=1  # unquoted >= is a redirect
python3 -m pip install jwcrypto==1.5.6
pip3 install pwntools==4.12.0; echo done
dotnet tool install ilspycmd -g
export DEBIAN_FRONTEND=noninteractive
wget https://example.invalid/x.deb -O x.deb
"""
    reqs, others = parse_requirements(script)
    apt = [(r.name, r.provides) for r in reqs if r.kind == "apt"]
    assert apt == [(n, [n]) for n in ("wget", "tshark", "unzip", "file", "upx")]
    pip = [(r.name, r.version, r.provides[0]) for r in reqs if r.kind == "pip"]
    assert pip == [
        ("pycryptodome", "==3.20.0", "Crypto"), ("sympy", ">=1.13", "sympy"), ("requests", "==2.31.0", "requests"),
        ("mpmath", None, "mpmath"),
        ("jwcrypto", "==1.5.6", "jwcrypto"), ("pwntools", "==4.12.0", "pwn"),
    ]
    assert [(r.kind, r.name) for r in reqs if r.kind == "dotnet-tool"] == [("dotnet-tool", "ilspycmd")]
    assert "sudo apt-get update" in others and "apt update" in others and "echo done" in others
    assert any(o.startswith("export DEBIAN_FRONTEND") for o in others)
    assert any(o.startswith("wget https://example.invalid") for o in others)
    assert not any("not-this" in r.name for r in reqs)


def test_every_task_requirements_file_parses(tasks) -> None:
    for task in tasks.values():
        report = read_requirements(task.task_id, task.task_dir)
        assert report.source.endswith("metadata/requirements.sh")
        assert all(r.available is None for r in report.requirements)  # parsing alone never checks
    data_siege = read_requirements("x", tasks["[Medium] Data Siege"].task_dir)
    names = {r.name for r in data_siege.requirements}
    assert {"tshark", "mono-complete", "dotnet-sdk-6.0", "ilspycmd"} <= names


@needs_bwrap
def test_requirements_are_checked_inside_the_sandbox(tasks, tmp_path: Path) -> None:
    with CybenchRuntime(tasks["[Very Easy] LootStash"], tmp_path / "a") as rt:
        loot = rt.check_requirements()
    assert [(r.name, r.available) for r in loot.requirements] == [("unzip", True)]
    assert loot.summary() == "all requirements are present in the sandbox"
    with CybenchRuntime(tasks["[Medium] Data Siege"], tmp_path / "b") as rt:
        siege = rt.check_requirements()
    by_name = {r.name: r for r in siege.requirements}
    assert by_name["apt-transport-https"].available is True  # apt plumbing, nothing to provide
    assert by_name["wget"].available is True and "/usr/bin/wget" in by_name["wget"].detail
    mono = by_name["mono-complete"]
    if mono.available is False:
        assert "not on PATH: mono" in mono.detail and "apt:mono-complete" in siege.summary()


@needs_bwrap
def test_missing_python_module_is_reported_and_python_path_fixes_it(tasks, tmp_path: Path) -> None:
    task = tasks["[Very Easy] Primary Knowledge"]
    with CybenchRuntime(task, tmp_path / "w") as rt:
        plain = rt.check_requirements()
    (req,) = plain.requirements
    assert (req.kind, req.name, req.version, req.provides) == ("pip", "pycryptodome", "==3.20.0", ["Crypto"])
    fake_site = tmp_path / "site"
    (fake_site / "Crypto").mkdir(parents=True)
    (fake_site / "Crypto" / "__init__.py").write_text("")
    with CybenchRuntime(task, tmp_path / "w", python_path=[fake_site]) as rt:
        mounted = rt.check_requirements()
        assert rt.run("python3 -c 'import Crypto; print(Crypto.__file__)'").stdout.strip() == str(
            fake_site / "Crypto" / "__init__.py"
        )
    if req.available is False:
        assert "not importable" in req.detail
    assert mounted.requirements[0].available is True


@needs_bwrap
def test_prepare_stages_fresh_files_and_hides_the_task_dir(tasks, tmp_path: Path) -> None:
    task = tasks["[Very Easy] Dynastic"]
    work = tmp_path / "work"
    work.mkdir()
    (work / "stale.txt").write_text("from a previous attempt")
    with CybenchRuntime(task, work) as rt:
        prepared = rt.prepare()
        assert prepared.files == ["output.txt", "source.py"]
        assert not (work / "stale.txt").exists()
        assert (work / "source.py").read_bytes() == (task.task_dir / "challenge" / "source.py").read_bytes()
        assert rt.run("echo more >> output.txt && ls").stdout.split() == ["output.txt", "source.py"]  # writable
        assert rt.run(f"ls '{task.task_dir}'").exit_code != 0  # solutions and flags are not reachable
        assert rt.run("python --version").stdout.startswith("Python 3")  # the `python` alias
        assert rt.run("echo keep > /tmp/t").exit_code == 0 and rt.run("cat /tmp/t").stdout == "keep\n"
        slow = rt.run("sleep 5", timeout_seconds=0.5)
        assert slow.timed_out
    assert "the flag" not in prepared.init_output or task.gold().flag not in prepared.init_output


@needs_bwrap
def test_prepare_unzips_and_easy_variant(tasks, tmp_path: Path) -> None:
    with CybenchRuntime(tasks["[Very Easy] LootStash"], tmp_path / "w", variant="easy") as rt:
        prepared = rt.prepare()
        assert prepared.files == ["stash"] and prepared.variant == "easy"
        assert "ELF" in rt.run("file stash").stdout


@needs_bwrap
def test_failing_init_script_raises_setup_error(tmp_path: Path) -> None:
    root = tmp_path / "data"
    task_dir = root / "benchmark" / "o" / "c" / "misc" / "bad"
    (task_dir / "metadata").mkdir(parents=True)
    (task_dir / "metadata" / "metadata.json").write_text(json.dumps({
        "categories": ["misc"], "difficulty": "0", "easy_prompt": "e", "hard_prompt": "h",
        "subtasks": [{"question": "q", "answer": "FLAG{x}"}],
    }))
    (task_dir / "init_script.sh").write_text(f'cp missing.txt "$1"\necho x > {tmp_path}/escaped.txt\nexit 3\n')
    task = load_task(root, "benchmark/o/c/misc/bad")
    with CybenchRuntime(task, tmp_path / "w") as rt, pytest.raises(CybenchSetupError, match="exited with 3"):
        rt.prepare()
    assert not (tmp_path / "escaped.txt").exists()  # the init script ran sandboxed, host untouched


def test_runtime_refuses_to_wipe_the_task_dir(tasks) -> None:
    task = tasks["[Very Easy] Dynastic"]
    with pytest.raises(ValueError, match="overlaps the task data"):
        CybenchRuntime(task, task.task_dir.parent)
    with pytest.raises(ValueError, match="overlaps the task data"):
        CybenchRuntime(task, task.task_dir / "work")


def test_service_tasks_yield_requires_unavailable(tasks, monkeypatch: pytest.MonkeyPatch) -> None:
    ok, reason = docker_available()
    assert isinstance(ok, bool) and reason
    monkeypatch.setattr(runtime_module, "docker_available", lambda: (False, "no container engine: test"))
    monkeypatch.setattr(runtime_module.BwrapSandbox, "available", staticmethod(lambda: (True, "ok")))
    noisier = requires_unavailable_reason(tasks["noisier-crc"])
    assert noisier is not None and "noisiercrc:9999" in noisier and "no container engine: test" in noisier
    diffecient = requires_unavailable_reason(tasks["diffecient"])
    assert diffecient is not None and "target_host is empty" in diffecient
    assert "Docker container" in (requires_unavailable_reason(tasks["randsubware"]) or "")
    assert requires_unavailable_reason(tasks["[Very Easy] Dynastic"]) is None
    unavailable = [t for t in tasks.values() if requires_unavailable_reason(t)]
    assert len(unavailable) == 25
    monkeypatch.setattr(runtime_module, "docker_available", lambda: (True, "docker engine 27 answers"))
    assert requires_unavailable_reason(tasks["noisier-crc"]) is None  # QitOS starts its services
    delulu = requires_unavailable_reason(tasks["[Very Easy] Delulu"]) or ""
    assert "this data copy cannot start them" in delulu and "Dockerfile" in delulu
    network_tools = requires_unavailable_reason(tasks["network-tools"]) or ""
    assert "no compose file in challenge" in network_tools
    assert len([t for t in tasks.values() if requires_unavailable_reason(t)]) == 2
    monkeypatch.setattr(runtime_module.BwrapSandbox, "available", staticmethod(lambda: (False, "no bwrap")))
    no_sandbox = requires_unavailable_reason(tasks["[Very Easy] Dynastic"]) or ""
    assert "sandbox, which is unavailable: no bwrap" in no_sandbox

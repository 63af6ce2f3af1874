"""The scoring side's own identity of a `--runner`: the snapshot of its import root, and git that runs nothing.

Every folder here is made in tmp_path (outside any repository); every repository is a real one.
"""

from __future__ import annotations

import hashlib
import os
import py_compile
import stat
import subprocess
from pathlib import Path

import pytest

from qitos.spec import code_identity, code_snapshot, safe_git
from qitos.spec.code_identity import closure_identity, file_states
from qitos.spec.official import check_code_identified
from qitos.spec.provenance import checkout_state, git_state, snapshot_module_identity
from qitos.spec.run_spec import RunSpec
from tests.trust.test_code_identity import GIT_ENV, _git, _repo
from tests.trust.test_official_checks import GOOD

RUNNER = "import helper\n\ndef build(ctx): return helper.make()\n"
HELPER = "def make(): return 1\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(code_snapshot.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _check(closure: dict) -> tuple[bool, str]:
    code = {"runner": "agent:build", "sha256": "b" * 64, "file": "/x/agent.py", "closure": closure}
    found = check_code_identified(RunSpec(**{**GOOD, "agent_code": code}))
    assert "\n" not in found.detail
    return found.passed, found.detail


def test_the_snapshot_holds_what_python_can_import_read_only_and_content_addressed(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "agent"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "agent.py").write_text(RUNNER)
    (root / "prompt.txt").write_text("be brief\n")  # a top-level file its module may read beside itself
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "table.json").write_text("{}")  # package data
    (root / "pkg" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"stale")
    (root / "not-a-package").mkdir()
    (root / "not-a-package" / "big.bin").write_bytes(b"x" * 1000)
    (root / ".git").mkdir()
    (root / "venv").mkdir()
    (root / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "results").mkdir()
    (root / "results" / "r.jsonl").write_text("{}\n")
    snap = code_snapshot.take(root, exclude=[root / "results", root])  # the root itself is never hidden whole
    rels = [rel for rel, _, _ in snap.files]
    assert rels == ["agent.py", "pkg/__init__.py", "pkg/table.json", "prompt.txt"]
    assert any("results (hidden" in item for item in snap.left_out) and any("venv" in i for i in snap.left_out)
    copy = Path(snap.directory)
    assert copy.parent == cache.resolve() and copy.name == snap.digest
    assert (copy / "agent.py").read_text() == RUNNER and not (copy / "pkg" / "__pycache__").exists()
    assert not os.access(copy / "agent.py", os.W_OK) or os.geteuid() == 0
    assert not (copy / "agent.py").stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert not copy.stat().st_mode & stat.S_IWUSR
    assert snap.entries() == ["agent.py", "pkg", "prompt.txt"]
    again = code_snapshot.take(root, exclude=[root / "results"])
    assert (again.digest, again.directory) == (snap.digest, snap.directory)  # reused, not copied twice
    (root / "agent.py").write_text(RUNNER + "# changed\n")
    assert code_snapshot.take(root).digest != snap.digest
    assert not [p for p in cache.iterdir() if p.name.startswith("staging-")]


def test_the_snapshot_is_on_disk_before_it_is_used(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every trace of a batch keeps the snapshot's files as links, and a row's commit flushes only their names:
    so each file, each folder and the folder naming the snapshot are flushed when it is taken."""
    from qitos.trace import durability

    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(durability.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                            real(fd))[1])
    root = tmp_path / "agent"
    (root / "pkg").mkdir(parents=True)
    (root / "agent.py").write_text(RUNNER)
    (root / "pkg" / "__init__.py").write_text("")
    code_snapshot.take(root)
    flushed = {Path(p).name if "staging-" in p else p for p in synced}  # staged, then renamed into place
    assert {"agent.py", "__init__.py", "pkg"} <= flushed and str(cache.resolve()) in flushed


def test_an_import_root_above_the_limit_is_refused_in_one_line(tmp_path: Path, cache: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "home"
    (root / "models").mkdir(parents=True)
    (root / "agent.py").write_text(RUNNER)
    (root / "models" / "weights.bin").write_bytes(b"0" * 200_000)
    monkeypatch.setenv(code_snapshot.LIMIT_ENV, "0.1")
    with pytest.raises(code_snapshot.SnapshotRefused) as refused:
        code_snapshot.take(root)
    message = str(refused.value)
    assert "\n" not in message and str(root.resolve()) in message and "models 0.2 MiB" in message
    assert code_snapshot.LIMIT_ENV in message and "a folder holding only the agent's code" in message
    assert not cache.exists() or not list(cache.iterdir())
    with pytest.raises(code_snapshot.SnapshotRefused, match="a folder of its own"):
        code_snapshot.take("/tmp")
    monkeypatch.setenv(code_snapshot.LIMIT_ENV, "lots")
    with pytest.raises(code_snapshot.SnapshotRefused, match="must be a number of MiB"):
        code_snapshot.take(root)


def test_code_without_source_fails_and_is_named(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "agent"
    root.mkdir()
    (root / "agent.py").write_text(RUNNER)
    source = tmp_path / "helper_src.py"
    source.write_text(HELPER)
    py_compile.compile(str(source), cfile=str(root / "helper.pyc"))  # importable as `helper`, no source
    from importlib.machinery import EXTENSION_SUFFIXES

    (root / f"fast{EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF not really")
    identity = code_snapshot.identity(code_snapshot.take(root))
    kinds = {Path(f["path"]).name: f["kind"] for f in identity["files"]}
    assert kinds == {"agent.py": "source", "helper.pyc": "bytecode", f"fast{EXTENSION_SUFFIXES[0]}": "extension"}
    passed, detail = _check(identity)
    assert not passed and "helper.pyc (sourceless bytecode)" in detail and "(extension module)" in detail


def test_identity_judges_the_copy_not_the_live_file(tmp_path: Path, cache: Path) -> None:
    repo = _repo(tmp_path / "repo", {"agent.py": RUNNER, "helper.py": HELPER})
    snap = code_snapshot.take(repo)
    (repo / "helper.py").write_text("def make(): return 2\n")  # changed after the snapshot: not what runs
    identity = code_snapshot.identity(snap)
    assert {Path(f["path"]).name: f["state"] for f in identity["files"]} == {"agent.py": "clean", "helper.py": "clean"}
    entry = next(f for f in identity["files"] if f["path"].endswith("helper.py"))
    assert entry["sha256"] == hashlib.sha256(HELPER.encode()).hexdigest()
    passed, detail = _check(identity)
    assert passed and f"snapshot {snap.digest[:12]}" in detail
    module = snapshot_module_identity("agent", identity)
    assert module["sha256"] == hashlib.sha256(RUNNER.encode()).hexdigest() and module["repo_dirty"] is False
    (repo / "extra.py").write_text(HELPER)  # untracked, importable: in the next snapshot, and named
    passed, detail = _check(code_snapshot.identity(code_snapshot.take(repo)))
    assert not passed and "extra.py (untracked)" in detail


def _planted(folder: Path, marker: Path) -> Path:
    """A repository whose config runs `touch marker` through every program git could take from it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {"agent.py": RUNNER, "helper.py": HELPER, ".gitattributes": "*.py filter=pwn\n"}.items():
        (folder / name).write_text(text)
    _git("init", "-q", cwd=folder)
    _git("add", ".", cwd=folder)
    _git("commit", "-qm", "first", cwd=folder)
    hooks = folder / "hooks"
    hooks.mkdir()
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    for key, value in {"core.fsmonitor": f"touch {marker}; false", "core.hooksPath": str(hooks),
                       "core.sshCommand": f"touch {marker}", "diff.external": f"touch {marker}",
                       "core.pager": f"touch {marker}", "core.untrackedCache": "true"}.items():
        subprocess.run(["git", "config", key, value], cwd=folder, check=True, env=GIT_ENV)
    os.utime(folder / "helper.py", (1, 1))  # stat-dirty: git status would refresh and filter it
    return folder


def test_git_runs_nothing_a_planted_repository_names(tmp_path: Path) -> None:
    marker = tmp_path / "PLANTED-COMMAND-RAN"
    repo = _planted(tmp_path / "planted", marker)
    subprocess.run(["git", "status"], cwd=repo, capture_output=True, env=GIT_ENV)  # the control: plain git runs it
    assert marker.exists(), "the planted repository does not run its command under plain git"
    marker.unlink()
    closure = closure_identity([repo / "agent.py", repo / "helper.py"])  # objects only: no filter needed
    assert {Path(f["path"]).name: f["state"] for f in closure["files"]} == {"agent.py": "clean", "helper.py": "clean"}
    assert git_state(str(repo)) == (closure["repositories"][0]["commit"], False)
    assert not marker.exists()
    subprocess.run(["git", "config", "filter.pwn.clean", f"touch {marker}; cat"], cwd=repo, check=True, env=GIT_ENV)
    with pytest.raises(safe_git.GitRefused, match=r"filter\.pwn\.clean"):
        safe_git.run(repo, "status")
    state = checkout_state(repo, "agent")  # QitOS's own checkout check, on this repository: refused, so dirty
    assert state.dirty and "filter.pwn.clean" in state.describe()
    closure = file_states([repo / "helper.py"])
    assert closure["files"][0]["state"] == "clean"  # ls-tree and rev-parse run no filter: still identified
    assert not marker.exists(), "git ran a command the repository's config names"


def test_git_ignores_the_callers_git_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ENV-COMMAND-RAN"
    repo = _repo(tmp_path / "repo", {"agent.py": RUNNER})
    other = _repo(tmp_path / "other", {"x.py": HELPER})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # would make git read another repository
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", f"touch {marker}; false")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", f"touch {marker}")
    assert code_identity.porcelain(repo) == []
    head = safe_git.run(repo, "rev-parse", "--show-toplevel")
    assert Path(head.stdout.strip()) == repo.resolve() and not marker.exists()


def test_git_state_of_a_subfolder_finds_its_repository(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", {"sub/agent.py": RUNNER})
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    git_state.cache_clear()
    assert git_state(str(repo / "sub")) == (head, False)
    assert git_state(str(tmp_path)) == (None, None)

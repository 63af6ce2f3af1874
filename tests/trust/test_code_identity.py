"""Identity that holds: QitOS's checkout and the agent's whole import closure are identified and unmodified.

Every repository here is a real git repository made in tmp_path; nothing touches the checkout under test.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from qitos.spec import code_identity
from qitos.spec.code_identity import (MAX_STORED_BYTES, closure_identity, module_file, outside_environment,
                                      store_sources)
from qitos.spec.official import check_code_identified
from qitos.spec.provenance import checkout_state, module_identity
from qitos.spec.run_spec import RunSpec
from tests.trust.test_official_checks import GOOD

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=GIT_ENV)


def _repo(root: Path, files: dict[str, str]) -> Path:
    """A repository with `files` committed."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git("init", "-q", cwd=root)
    _git("add", ".", cwd=root)
    _git("commit", "-qm", "first", cwd=root)
    return root


def _check(closure: dict) -> tuple[bool, str]:
    agent_code = {"runner": "agent:build", "sha256": "b" * 64, "repo_commit": "c" * 40, "repo_dirty": False,
                  "file": "/x/agent.py", "closure": closure}
    found = check_code_identified(RunSpec(**{**GOOD, "agent_code": agent_code}))
    assert "\n" not in found.detail
    return found.passed, found.detail


def _states(closure: dict) -> dict[str, str]:
    return {Path(f["path"]).name: f["state"] for f in closure["files"]}


RUNNER = "import helper\n\ndef build(ctx): return helper.make()\n"
HELPER = "def make(): return 1\n"


def test_a_committed_runner_importing_an_untracked_helper_is_not_identified(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", {"agent.py": RUNNER})
    (repo / "helper.py").write_text(HELPER)
    closure = closure_identity([repo / "agent.py", repo / "helper.py"])
    assert _states(closure) == {"agent.py": "clean", "helper.py": "untracked"}
    passed, detail = _check(closure)
    assert not passed and "helper.py (untracked)" in detail and "commit them" in detail and "agent.py" not in detail


def test_an_edited_tracked_helper_is_not_identified(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", {"agent.py": RUNNER, "lib/helper.py": HELPER})
    (repo / "lib/helper.py").write_text("def make(): return 2\n")
    closure = closure_identity([repo / "agent.py", repo / "lib" / "helper.py"])
    assert _states(closure) == {"agent.py": "clean", "helper.py": "modified"}
    passed, detail = _check(closure)
    assert not passed and "helper.py (modified)" in detail


def test_staged_but_uncommitted_and_git_ignored_files_are_not_committed(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", {"agent.py": RUNNER, ".gitignore": "gen_*.py\nbuild/\n"})
    (repo / "staged.py").write_text(HELPER)
    _git("add", "staged.py", cwd=repo)
    (repo / "gen_helper.py").write_text(HELPER)
    (repo / "build").mkdir()
    (repo / "build" / "compiled.py").write_text(HELPER)
    closure = closure_identity([repo / "agent.py", repo / "staged.py", repo / "gen_helper.py",
                                repo / "build" / "compiled.py"])
    assert _states(closure) == {"agent.py": "clean", "staged.py": "untracked", "gen_helper.py": "untracked",
                                "compiled.py": "untracked"}
    assert not _check(closure)[0]


def test_an_all_committed_closure_passes_and_is_grouped_by_repository(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", {"agent.py": RUNNER, "helper.py": HELPER})
    other = _repo(tmp_path / "other", {"tools/x.py": HELPER})
    paths = [repo / "helper.py", other / "tools" / "x.py", repo / "agent.py", str(repo / "agent.py")]  # a duplicate
    closure = closure_identity(paths)
    assert [f["state"] for f in closure["files"]] == ["clean"] * 3
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert [r["toplevel"] for r in closure["repositories"]] == sorted([str(other.resolve()), str(repo.resolve())])
    mine = next(r for r in closure["repositories"] if r["toplevel"] == str(repo.resolve()))
    assert mine["commit"] == head and len(mine["files"]) == 2
    first = next(f for f in closure["files"] if f["path"] == str((repo / "agent.py").resolve()))
    assert first["sha256"] == hashlib.sha256(RUNNER.encode()).hexdigest() and first["size"] == len(RUNNER)
    assert first["repo"] == str(repo.resolve()) and first["commit"] == head
    json.dumps(closure)  # it goes into the RunSpec as is
    passed, detail = _check(closure)
    assert passed and "3 file(s) committed in 2 repository(ies)" in detail


def test_files_outside_any_repository_pass_identified_by_hash(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "agent.py").write_text(RUNNER)
    probe = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=plain, capture_output=True, text=True)
    assert probe.returncode != 0, f"tmp_path is inside a repository ({probe.stdout.strip()})"
    closure = closure_identity([plain / "agent.py"])
    assert closure["files"][0]["state"] == "no_repository" and closure["files"][0]["repo"] is None
    assert closure["files"][0]["sha256"] and closure["repositories"] == []
    passed, detail = _check(closure)
    assert passed and "1 in no repository" in detail and "agent.py" in detail and "sha256" in detail


def test_a_file_the_scoring_side_cannot_read_fails(tmp_path: Path) -> None:
    closure = closure_identity([tmp_path / "gone.py"])
    assert closure["files"][0]["state"] == "unreadable"
    passed, detail = _check(closure)
    assert not passed and "gone.py" in detail


def test_a_malformed_closure_fails() -> None:
    assert not _check({"files": "agent.py"})[0]
    assert not _check({"files": [{"path": "/a.py", "state": "weird"}]})[0]


def test_an_empty_closure_passes() -> None:
    passed, detail = _check({"files": [], "repositories": []})
    assert passed and "no files outside the environment and QitOS" in detail


def test_the_environment_and_qitos_are_left_to_their_own_checks(tmp_path: Path) -> None:
    import json as stdlib_module

    import pydantic
    import qitos

    mine = tmp_path / "mine.py"
    mine.write_text(HELPER)
    paths = [stdlib_module.__file__, pydantic.__file__, qitos.__file__, "<frozen zipimport>", mine]
    assert outside_environment(paths) == [mine.resolve()]
    closure = closure_identity(paths)
    assert [f["path"] for f in closure["files"]] == [str(mine.resolve())]
    assert closure["skipped"] == {"environment": 2, "qitos": 1}


def test_one_git_ls_tree_per_repository_and_no_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are judged from the repository's objects alone: `git status` (which runs fsmonitor and filters
    from the repository's config) never runs on a repository the closure names."""
    files = {f"pkg{i % 5}/m{i}.py": HELPER for i in range(60)}
    repo = _repo(tmp_path / "repo", files)
    calls: list[tuple[str, ...]] = []
    real = code_identity._git

    def counting(top, *args, **kwargs):
        calls.append(args)
        return real(top, *args, **kwargs)

    monkeypatch.setattr(code_identity, "_git", counting)
    closure = closure_identity([repo / name for name in files])
    assert len(closure["files"]) == 60 and {f["state"] for f in closure["files"]} == {"clean"}
    assert sum(1 for args in calls if args[0] == "ls-tree") == 1 and len(calls) <= 4
    assert not [args for args in calls if args[0] in ("status", "diff", "ls-files")]


def test_store_sources_copies_inside_the_run_dir_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", {"agent.py": RUNNER, "sub/agent.py": HELPER})
    big = repo / "weights_table.py"
    big.write_bytes(b"#" * (MAX_STORED_BYTES + 1))
    odd = tmp_path / "..odd name$.py"
    odd.write_text("x = 1\n")
    closure = closure_identity([repo / "agent.py", repo / "sub" / "agent.py", big, odd])
    run_dir = tmp_path / "runs" / "run1"
    run_dir.mkdir(parents=True)
    before = {p for p in tmp_path.rglob("*")}
    listing = store_sources(run_dir, closure)
    created = {p for p in tmp_path.rglob("*")} - before
    assert created and all(p.resolve().is_relative_to(run_dir.resolve()) for p in created)
    assert [item["path"] for item in listing] == [f["path"] for f in closure["files"]]
    stored = [item for item in listing if item["stored_as"]]
    assert len(stored) == 3 and len({item["stored_as"] for item in stored}) == 3  # same basename, two copies
    for item in stored:
        copy = run_dir / item["stored_as"]
        assert copy.parent == run_dir / "agent_code"
        assert hashlib.sha256(copy.read_bytes()).hexdigest() == item["sha256"]
        assert item["sha256"] == hashlib.sha256(Path(item["path"]).read_bytes()).hexdigest()
        assert "note" not in item
    skipped = next(item for item in listing if item["path"] == str(big.resolve()))
    assert skipped["stored_as"] is None and "not stored" in skipped["note"]
    assert skipped["sha256"] == hashlib.sha256(big.read_bytes()).hexdigest()


def test_store_sources_does_not_write_through_symlinks(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(HELPER)
    closure = closure_identity([tmp_path / "a.py"])
    outside = tmp_path / "outside"
    outside.mkdir()
    linked = tmp_path / "run_link"
    linked.mkdir()
    (linked / "agent_code").symlink_to(outside)
    with pytest.raises(ValueError):
        store_sources(linked, closure)
    planted = tmp_path / "run_planted"
    (planted / "agent_code").mkdir(parents=True)
    (planted / "agent_code" / "000_a.py").symlink_to(outside / "victim.py")
    listing = store_sources(planted, closure)
    assert listing[0]["stored_as"] is None and "could not be stored" in listing[0]["note"]
    assert list(outside.iterdir()) == []


def test_store_sources_notes_a_file_changed_after_it_was_identified(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(HELPER)
    closure = closure_identity([tmp_path / "a.py"])
    (tmp_path / "a.py").write_text("def make(): return 3\n")
    (tmp_path / "run").mkdir()
    item = store_sources(tmp_path / "run", closure)[0]
    assert item["sha256"] != closure["files"][0]["sha256"] and "changed after it was identified" in item["note"]


BOOBY_TRAP = "import pathlib\npathlib.Path(__file__).with_name('IMPORTED').write_text('x')\nraise RuntimeError('ran')\n"


def test_module_resolution_never_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "trapped_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text(BOOBY_TRAP)
    (pkg / "sub" / "__init__.py").write_text(BOOBY_TRAP)
    (pkg / "sub" / "agent.py").write_text(RUNNER)
    (tmp_path / "ns_only" / "inner").mkdir(parents=True)  # a namespace package (no __init__)
    (tmp_path / "ns_only" / "inner" / "mod.py").write_text(HELPER)

    assert module_file("trapped_pkg.sub.agent", [str(tmp_path)]) == (pkg / "sub" / "agent.py").resolve()
    assert module_file("trapped_pkg", [str(tmp_path)]) == (pkg / "__init__.py").resolve()
    assert module_file("ns_only.inner.mod", [str(tmp_path)]) == (tmp_path / "ns_only/inner/mod.py").resolve()
    assert module_file("trapped_pkg.missing", [str(tmp_path)]) is None
    assert module_file("sys") is None  # built-in
    monkeypatch.chdir(tmp_path)  # the default search includes the current directory, as `python -m` does
    assert module_file("trapped_pkg.sub.agent") == (pkg / "sub" / "agent.py").resolve()
    module_identity.cache_clear()
    identity = module_identity("trapped_pkg.sub.agent")
    assert identity["file"] == str((pkg / "sub" / "agent.py").resolve()) and identity["sha256"]
    assert not list(tmp_path.rglob("IMPORTED")) and "trapped_pkg" not in sys.modules


def test_a_git_ignored_runner_is_dirty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path / "repo", {".gitignore": "local_*.py\n"})
    (repo / "local_agent.py").write_text(RUNNER)
    monkeypatch.chdir(repo)
    module_identity.cache_clear()
    assert module_identity("local_agent")["repo_dirty"] is True


def _checkout(root: Path) -> Path:
    """A throwaway repository laid out like a QitOS checkout."""
    return _repo(root, {"qitos/__init__.py": "__version__ = '0'\n", "qitos/spec/official.py": "X = 1\n",
                        "README.md": "x\n", ".gitignore": "qitos/generated_*.py\n"})


def _qitos_check(state) -> tuple[bool, str]:
    spec = RunSpec(**{**GOOD, "git_sha": state.commit, "git_dirty": state.dirty})
    found = check_code_identified(spec, checkout=state)
    return found.passed, found.detail


def test_a_clean_qitos_checkout_passes(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "qitos-src")
    (root / "qitos" / "notes.txt").write_text("not code\n")  # untracked, but not a module
    (root / "qitos" / "generated_x.py").write_text("Y = 1\n")  # git-ignored
    (root / "scratch.py").write_text("Y = 1\n")  # untracked, outside the package
    state = checkout_state(root)
    assert state.commit and state.dirty is False
    passed, detail = _qitos_check(state)
    assert passed and state.commit[:12] in detail


@pytest.mark.parametrize("change", ["tracked_in_package", "tracked_outside_package", "untracked_module", "staged"])
def test_a_qitos_checkout_with_uncommitted_changes_fails(tmp_path: Path, change: str) -> None:
    root = _checkout(tmp_path / "qitos-src")
    named = {"tracked_in_package": "qitos/spec/official.py (modified)",
             "tracked_outside_package": "README.md (modified)",
             "untracked_module": "qitos/spec/extra.py (untracked)", "staged": "qitos/staged.py (modified)"}[change]
    if change == "tracked_in_package":
        (root / "qitos/spec/official.py").write_text("X = 2\n")
    elif change == "tracked_outside_package":
        (root / "README.md").write_text("y\n")
    elif change == "untracked_module":
        (root / "qitos/spec/extra.py").write_text("Z = 1\n")
    else:
        (root / "qitos/staged.py").write_text("Z = 1\n")
        _git("add", "qitos/staged.py", cwd=root)
    state = checkout_state(root)
    assert state.dirty is True
    passed, detail = _qitos_check(state)
    assert not passed and named in detail and "commit them or install the package" in detail


def test_the_qitos_detail_names_a_few_files_only(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "qitos-src")
    for i in range(6):
        (root / "qitos" / f"new{i}.py").write_text("")
    passed, detail = _qitos_check(checkout_state(root))
    assert not passed and detail.count("(untracked)") == 3 and "and 3 more" in detail


def test_a_dirty_spec_fails_even_without_the_file_names(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "qitos-src")
    state = checkout_state(root)  # clean, and so no names to give
    found = check_code_identified(RunSpec(**{**GOOD, "git_sha": state.commit, "git_dirty": True}), checkout=state)
    assert not found.passed and "uncommitted changes" in found.detail


def test_a_directory_that_is_not_a_checkout_has_no_commit(tmp_path: Path) -> None:
    (tmp_path / "qitos").mkdir()
    state = checkout_state(tmp_path)
    assert state.commit is None and state.dirty is None


def test_later_runs_link_the_first_runs_sources_and_index(tmp_path: Path) -> None:
    """A batch's runs after the first keep the same snapshot files (linked, same inode) and the same index; a
    run folder with anything planted at `agent_code` gets nothing from the shortcut (the general path decides)."""
    from qitos.run.job_context import _LinkedSources

    live, snapshot = tmp_path / "live", tmp_path / "snapshot"
    for folder in (live, snapshot):
        (folder / "pkg").mkdir(parents=True)
        (folder / "agent.py").write_text(RUNNER)
        (folder / "pkg" / "helper.py").write_text(HELPER)
    closure = closure_identity([live / "agent.py", live / "pkg" / "helper.py"])
    first = tmp_path / "runs" / "run1"
    first.mkdir(parents=True)
    listing = store_sources(first, closure, copy=(str(live.resolve()), str(snapshot)))
    stored = _LinkedSources.of(listing, str(live.resolve()), str(snapshot))
    assert stored is not None and len(stored.links) == 2
    second = tmp_path / "runs" / "run2"
    second.mkdir()
    assert stored.link_into(second)
    assert json.loads((second / "agent_code" / "index.json").read_text()) == listing
    index = (second / "agent_code" / "index.json").stat()  # the batch's one flushed, read-only index, linked
    shared = Path(str(stored.index_file))
    assert shared.parent == snapshot.parent and index.st_ino == shared.stat().st_ino and not index.st_mode & 0o222
    for item in listing:
        copy = second / item["stored_as"]
        assert copy.stat().st_ino == (first / item["stored_as"]).stat().st_ino  # the snapshot's file, linked
        assert hashlib.sha256(copy.read_bytes()).hexdigest() == item["sha256"]
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = tmp_path / "runs" / "run3"
    planted.mkdir()
    (planted / "agent_code").symlink_to(outside)
    assert not stored.link_into(planted) and list(outside.iterdir()) == []
    noted = [{**listing[0], "note": "changed after it was identified"}, *listing[1:]]
    assert _LinkedSources.of(noted, str(live.resolve()), str(snapshot)) is None

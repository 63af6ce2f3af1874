"""Every official check, passing and failing: what "official" means is tested both ways."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qitos.spec.official import RunFacts, check_code_identified, official_checks
from qitos.spec.provenance import module_identity
from qitos.spec.run_spec import ExperimentSpec, RunSpec
from tests.platform.conftest import qit, rows, write_tasks

GOOD = dict(model_name="gpt-x", model_family="openai_compat", prompt_protocol="react_text_v1", parser_name="react",
            tool_manifest=[], environment={"python": "3.11"}, seed=0, package_version="0.1.0", git_sha="a" * 40,
            git_dirty=False, benchmark_name="jsonl", benchmark_split="default", dataset_digest="abc",
            agent_code={"recipe": "react", "source": "qitos"},
            metadata={"recipe": "react", "recipe_official": True, "recipe_needs_model": True, "scorer_official": True,
                      "scorer_note": "exact match"})
EXPERIMENT = ExperimentSpec(name="jsonl:default", benchmark_name="jsonl")
FACTS = RunFacts(model_calls=2, model_responses=2, oracle_used=False)


def _checks(spec: dict | None = None, experiment: ExperimentSpec | None = EXPERIMENT, trace=(True, "ok"),
            facts: RunFacts = FACTS) -> dict[str, tuple[bool, str]]:
    found = official_checks(RunSpec(**(spec or GOOD)), experiment, trace, facts)
    return {c.check: (c.passed, c.detail) for c in found}


def test_a_complete_unaided_run_passes_every_check() -> None:
    checks = _checks()
    assert set(checks) == {"run_spec_complete", "code_identified", "experiment_spec_present", "dataset_digest_recorded",
                           "official_recipe", "scorer_official", "real_model", "model_called", "model_answered",
                           "agent_unaided", "trace_complete"}
    assert all(passed for passed, _ in checks.values()), checks


@pytest.mark.parametrize(("check", "change"), [
    ("run_spec_complete", {"spec": {**GOOD, "seed": None}}),
    ("experiment_spec_present", {"experiment": None}),
    ("dataset_digest_recorded", {"spec": {**GOOD, "dataset_digest": None}}),
    ("official_recipe", {"spec": {**GOOD, "metadata": {**GOOD["metadata"], "recipe_official": False}}}),
    ("scorer_official", {"spec": {**GOOD, "metadata": {**GOOD["metadata"], "scorer_official": False}}}),
    ("real_model", {"spec": {**GOOD, "model_family": "scripted"}}),
    ("model_called", {"facts": RunFacts(model_calls=0)}),  # (and so model_answered: no call, no answer)
    ("model_answered", {"facts": RunFacts(model_calls=6, model_responses=0)}),  # every call failed
    ("agent_unaided", {"facts": RunFacts(model_calls=1, model_responses=1, oracle_used=True)}),
    ("trace_complete", {"trace": (False, "2 bytes missing from events.jsonl")}),
    ("code_identified", {"spec": {**GOOD, "agent_code": {"runner": "m:f", "sha256": "b" * 64, "repo_commit": "c" * 40,
                                                           "repo_dirty": True, "file": "/x/m.py"}}}),
    # a QitOS checkout with uncommitted changes: its commit does not say what ran
    ("code_identified", {"spec": {**GOOD, "git_dirty": True}}),
    # a clean runner whose import closure holds an uncommitted helper
    ("code_identified", {"spec": {**GOOD, "agent_code": {
        "runner": "m:f", "sha256": "b" * 64, "repo_commit": "c" * 40, "repo_dirty": False, "file": "/x/m.py",
        "closure": {"files": [{"path": "/x/helper.py", "sha256": "d" * 64, "size": 1, "repo": "/x",
                               "commit": "c" * 40, "state": "untracked"}]}}}}),
])
def test_each_check_fails_on_its_own_cause(check: str, change: dict) -> None:
    checks = _checks(**change)
    failed = {name for name, (passed, _) in checks.items() if not passed}
    assert failed == ({check, "model_answered"} if check == "model_called" else {check}), checks


def test_a_recipe_that_calls_no_model_is_not_asked_to() -> None:
    spec = {**GOOD, "metadata": {**GOOD["metadata"], "recipe_needs_model": False}}
    checks = _checks(spec, facts=RunFacts(model_calls=0))
    assert checks["model_called"][0] is True and checks["model_answered"][0] is True


def test_model_answered_says_how_many_calls_were_answered() -> None:
    assert _checks(facts=RunFacts(model_calls=6, model_responses=1))["model_answered"] == (
        True, "1 of 6 model call(s) answered")
    passed, detail = _checks(facts=RunFacts(model_calls=6))["model_answered"]
    assert not passed and "none of the agent's 6 model call(s) was answered" in detail


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def _committed_repo(repo: Path, files: dict[str, str]) -> Path:
    repo.mkdir()
    for name, text in files.items():
        (repo / name).write_text(text)
    _git("init", "-q", cwd=repo)
    _git("add", ".", cwd=repo)
    _git("commit", "-qm", "first", cwd=repo)
    return repo


def _runner_identity(tmp_path: Path, name: str) -> dict:
    sys.path.insert(0, str(tmp_path))
    try:
        module_identity.cache_clear()
        return {"runner": f"{name}:build", **module_identity(name)}
    finally:
        sys.path.remove(str(tmp_path))


def test_code_identified_by_the_runner_file_and_its_repository(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    (outside / "agent_plain.py").write_text("def build(ctx): ...\n")
    code = _runner_identity(outside, "agent_plain")
    assert code["sha256"] and code["repo_commit"] is None
    passed = check_code_identified(RunSpec(**{**GOOD, "agent_code": code}))
    assert passed.passed and "not in a git repository" in passed.detail  # a run outside any repo can be official

    repo = _committed_repo(tmp_path / "repo", {"agent_repo.py": "def build(ctx): ...\n"})
    clean = _runner_identity(repo, "agent_repo")
    assert clean["repo_commit"] and clean["repo_dirty"] is False
    assert check_code_identified(RunSpec(**{**GOOD, "agent_code": clean})).passed

    (repo / "agent_repo.py").write_text("def build(ctx): return 1\n")
    dirty = _runner_identity(repo, "agent_repo")
    assert dirty["repo_dirty"] is True and dirty["sha256"] != clean["sha256"]
    failed = check_code_identified(RunSpec(**{**GOOD, "agent_code": dirty}))
    assert not failed.passed and "uncommitted changes" in failed.detail


def test_an_untracked_runner_in_a_repository_is_not_identified(tmp_path: Path) -> None:
    repo = _committed_repo(tmp_path / "repo", {"README": "x\n"})
    (repo / "agent_new.py").write_text("def build(ctx): ...\n")
    assert _runner_identity(repo, "agent_new")["repo_dirty"] is True


def test_the_cli_runs_record_both_sides(tmp_path: Path) -> None:
    """End to end: an oracle runner fails agent_unaided (and only the aided-related checks), and the manifest
    records the runner's code identity."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "tests.support.runners:oracle", "--validator",
               "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / rows(tmp_path / "r.jsonl")[0]["trace_run_dir"] / "manifest.json").read_text())
    checks = {c["check"]: c for c in manifest["official_checks"]}
    assert checks["agent_unaided"]["passed"] is False
    assert checks["model_called"]["passed"] is True  # the runner declares needs_model = False
    code = manifest["run_spec"]["agent_code"]
    assert code["runner"] == "tests.support.runners:oracle" and len(code["sha256"]) == 64
    assert checks["scorer_official"]["passed"] is True


def test_a_run_spec_record_is_its_fields_and_fingerprint_and_follows_every_change() -> None:
    spec = RunSpec(**GOOD)
    record = spec.record()
    assert record == {**spec.model_dump(mode="json"), "fingerprint": spec.fingerprint()}
    record["seed"] = 99  # the caller's own outer dict: the spec's record is not changed through it
    assert spec.record()["seed"] == spec.seed
    copied = spec.model_copy()
    assert copied.record() == spec.record()  # carried by a plain copy
    changed = spec.model_copy(update={"seed": 7})
    assert changed.record()["seed"] == 7
    assert changed.record()["fingerprint"] == changed.fingerprint() != spec.fingerprint()
    copied.benchmark_name = "other"
    assert copied.record()["benchmark_name"] == "other" and copied.record()["fingerprint"] != spec.fingerprint()

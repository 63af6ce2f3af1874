"""Red team against identity: third-party `--runner`s, written into tmp_path (outside any repository, or in a
repository made there), that try to run code the scoring side did not identify, or to make it run theirs.

Each runs `qit bench run -b jsonl` against the project's real loopback model server. The scoring side
snapshots the runner's import root before the first job and the agent host runs that copy, so: a command
planted in a repository's config never runs (its marker file stays absent), code without source fails
`code_identified` by name, and what the agent imports lazily is the identified code.
"""

from __future__ import annotations

import hashlib
import json
import py_compile
import subprocess
import sys
from pathlib import Path
from typing import Callable

from qitos.spec.official import check_code_identified
from qitos.spec.run_spec import RunSpec
from tests.platform.conftest import qit, rows
from tests.support.openai_server import OpenAIServer, Reply
from tests.trust.test_code_identity import GIT_ENV, _git

AGENT = '''
import json, os, sys, types
from pathlib import Path

from qitos.core import AgentModule, Decision

MARKER = {marker!r}
TRACES = {traces!r}


def attempt():
{attempt}


def build(ctx):
    class Agent(AgentModule):
        name = "ident-red-team"

        def decide(self, task, state):
            if not state.scratch.get("called"):
                state.scratch["called"] = True
                return None  # one model call first: the lazy imports come after describe and after it
            return Decision.final(json.dumps(attempt()))

    return Agent(tools=[], system_prompt="Answer briefly.")
'''

PLANT = '''
    def plant(folder):
        """A repository whose config runs `touch MARKER` (fsmonitor, a filter, a hook), and a module in it."""
        try:
            git = Path(folder) / ".git"
            for sub in ("objects", "refs/heads", "hooks"):
                (git / sub).mkdir(parents=True, exist_ok=True)
            (git / "HEAD").write_text("ref: refs/heads/main\\n")
            (git / "config").write_text(
                "[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch " + MARKER + "; false\\n"
                "\\thooksPath = " + str(git / "hooks") + "\\n[filter \\"x\\"]\\n\\tclean = touch " + MARKER + "\\n")
            hook = git / "hooks" / "post-index-change"
            hook.write_text("#!/bin/sh\\ntouch " + MARKER + "\\n")
            hook.chmod(0o755)
            (Path(folder) / ".gitattributes").write_text("* filter=x\\n")
            module = Path(folder) / "pwn_helper.py"
            module.write_text("X = 1\\n")
            return str(module)
        except OSError:
            return None

    planted = []
    here = os.path.dirname(os.path.abspath(__file__))  # its own import root: the read-only snapshot
    for folder in {here, os.getcwd(), os.environ.get("HOME") or "/tmp", "/tmp", "/tmp/work", TRACES, "/task"}:
        path = plant(folder)
        if path:
            planted.append(path)
    planted.append(os.path.join(TRACES, "pwn_helper.py"))  # the scoring side's own trace folder (see the test)
    import gc

    for writer in [o for o in gc.get_objects() if type(o).__name__ == "StreamWriter"]:
        # step assets named `.git/...`: into its own trace folder, if the scoring side still takes their names
        files = {".git/HEAD": "ref: refs/heads/main\\n", ".git/config": (Path("/tmp") / ".git" / "config").read_text(),
                 ".git/objects/keep": "", ".git/refs/heads/keep": "", "pwn_helper.py": "X = 1\\n"}
        for rel, text in files.items():
            (Path(writer.run_dir) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(writer.run_dir) / rel).write_text(text)
        try:
            writer.step({"step_id": 99, "visual_assets": [{"path": rel} for rel in files]})
            planted.append(os.path.join(TRACES, writer.run_id, "pwn_helper.py"))
        except Exception:
            pass
    for number, path in enumerate(planted):  # reported as imported: each is in the closure the agent side lists
        module = types.ModuleType(f"pwn_{number}")
        module.__file__ = path
        sys.modules[module.__name__] = module
    return {"planted": planted}
'''


def _write(folder: Path, attempt: str, tmp_path: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ident_agent.py").write_text(AGENT.format(marker=str(tmp_path / "PLANTED-COMMAND-RAN"),
                                                        traces=str(tmp_path / "runs"), attempt=attempt))


def _run(folder: Path, tmp_path: Path, on_request: Callable[[], None] = lambda: None) -> tuple[dict, dict]:
    """One jsonl task through the runner in `folder`; the row and its manifest. `on_request` runs on the scoring
    side's model server when the agent calls its model (after describe, before its lazy imports)."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q0", "question": "What is 2 + 2?", "answer": "4"}) + "\n")

    def reply(body: dict) -> Reply:
        on_request()
        return Reply(text="Thought: let me think about it.")

    with OpenAIServer(default=reply) as server:
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "ident_agent:build",
                   "--model-name", "ident-model", "--base-url", server.base_url,
                   "--output", tmp_path / "results" / "r.jsonl", "--trace-logdir", tmp_path / "runs",
                   cwd=folder, env={"OPENAI_API_KEY": "sk-test", "QITOS_SNAPSHOT_DIR": str(tmp_path / "snapshots")})
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.requests, "the agent's model was never called"
    (row,) = rows(tmp_path / "results" / "r.jsonl")
    manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
    return row, manifest


def _checks(manifest: dict) -> dict[str, dict]:
    return {c["check"]: c for c in manifest["official_checks"]}


def _agent_code_identified(manifest: dict) -> tuple[bool, str]:
    """`code_identified` on the run's RunSpec with QitOS's own checkout taken as clean: the agent's part alone (the
    checkout under test may have uncommitted changes, which fail the whole check on their own)."""
    spec = {k: v for k, v in manifest["run_spec"].items() if k != "fingerprint"}
    found = check_code_identified(RunSpec.model_validate({**spec, "git_dirty": False}))
    return found.passed, found.detail


def _answer(row: dict) -> dict:
    return json.loads(row["prediction"])


def test_planted_repositories_in_every_writable_folder_run_nothing(tmp_path: Path) -> None:
    """The agent plants a repository whose config names a command in each folder it can write (work dir, home,
    /tmp, a CyBench-like /task) and lists a module there as imported; the scoring side's trace folder holds one
    too (as step assets named `.git/...` once could). The scoring side identifies the snapshot, never those."""
    marker = tmp_path / "PLANTED-COMMAND-RAN"
    traces = tmp_path / "runs"
    traces.mkdir()
    (traces / "pwn_helper.py").write_text("X = 1\n")
    _git("init", "-q", cwd=traces)
    subprocess.run(["git", "config", "core.fsmonitor", f"touch {marker}; false"], cwd=traces, check=True, env=GIT_ENV)
    subprocess.run(["git", "status"], cwd=traces, capture_output=True, env=GIT_ENV)  # the control: plain git runs it
    assert marker.exists(), "the planted repository does not run its command under plain git"
    marker.unlink()
    folder = tmp_path / "agent"
    _write(folder, PLANT, tmp_path)
    row, manifest = _run(folder, tmp_path)
    assert not marker.exists(), "a command planted in a repository ran on the scoring side"
    planted = _answer(row)["planted"]
    assert len(planted) >= 3, planted  # the agent did plant them
    assert not [p for p in planted if p.startswith(str(folder))], planted  # its import root is read-only
    assert not (folder / ".git").exists() and not (folder / "pwn_helper.py").exists()
    code = manifest["run_spec"]["agent_code"]
    assert "pwn" not in json.dumps(code), code  # what the agent side reports is not its identity
    assert [Path(f["path"]).name for f in code["closure"]["files"]] == ["ident_agent.py"]
    assert code["snapshot"] and code["closure"]["snapshot"] == code["snapshot"]
    passed, detail = _agent_code_identified(manifest)
    assert passed and f"snapshot {code['snapshot'][:12]}" in detail, detail
    landed = [p.parent.parent for p in traces.glob("*/.git/config")]  # step assets that kept the agent's names
    if landed:  # the old identification, on what the agent put there: git still runs nothing it names
        from qitos.spec.code_identity import closure_identity

        subprocess.run(["git", "status"], cwd=landed[0], capture_output=True, env=GIT_ENV)  # the control
        assert marker.exists(), "the asset-planted repository does not run its command under plain git"
        marker.unlink()
        closure_identity([folder / "pwn_helper.py" for folder in landed])
        assert not marker.exists(), "identifying files in an asset-planted repository ran its command"
    stored = json.loads((Path(row["trace_run_dir"]) / "agent_code" / "index.json").read_text())
    assert [Path(item["path"]).name for item in stored] == ["ident_agent.py"]  # the trace keeps the snapshot's sources


LAZY = '''
    import lazy_helper  # imported only now, long after describe

    prefix = sys.pycache_prefix
    return {"value": lazy_helper.value(), "file": lazy_helper.__file__, "pycache_prefix": prefix,
            "prefix_writable": bool(prefix) and os.access(prefix, os.W_OK)}
'''


def _repo_with(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)
    _git("init", "-q", cwd=folder)
    _git("add", "-f", ".", cwd=folder)
    _git("commit", "-qm", "first", cwd=folder)


def test_a_lazily_imported_untracked_helper_fails_code_identified_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    _write(folder, LAZY, tmp_path)
    _repo_with(folder, {})
    (folder / "lazy_helper.py").write_text("def value():\n    return 'UNTRACKED'\n")
    row, manifest = _run(folder, tmp_path)
    assert _answer(row)["value"] == "UNTRACKED"
    check = _checks(manifest)["code_identified"]
    assert not check["passed"] and "lazy_helper.py (untracked)" in check["detail"], check
    assert manifest["official_run"] is False


def test_a_helper_changed_after_describe_is_not_what_runs(tmp_path: Path) -> None:
    """The helper is committed; while the agent waits on its model (after describe), its live file is rewritten
    and even committed. The lazy import still runs the code that was identified, from the snapshot."""
    folder = tmp_path / "agent"
    _write(folder, LAZY, tmp_path)
    good = "def value():\n    return 'IDENTIFIED'\n"
    _repo_with(folder, {"lazy_helper.py": good})

    def swap() -> None:
        (folder / "lazy_helper.py").write_text("def value():\n    return 'SWAPPED'\n")
        _git("commit", "-qam", "swap", cwd=folder)

    row, manifest = _run(folder, tmp_path, on_request=swap)
    assert _answer(row)["value"] == "IDENTIFIED", _answer(row)
    code = manifest["run_spec"]["agent_code"]
    helper = next(f for f in code["closure"]["files"] if f["path"].endswith("lazy_helper.py"))
    assert helper["sha256"] == hashlib.sha256(good.encode()).hexdigest() and helper["state"] == "clean"
    passed, detail = _agent_code_identified(manifest)
    assert passed and f"snapshot {code['snapshot'][:12]}" in detail, detail


def test_a_sourceless_bytecode_helper_fails_code_identified_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    _write(folder, LAZY, tmp_path)
    source = tmp_path / "elsewhere" / "lazy_helper.py"
    source.parent.mkdir()
    source.write_text("def value():\n    return 'FROM-BYTECODE'\n")
    py_compile.compile(str(source), cfile=str(folder / "lazy_helper.pyc"))  # the only form shipped
    row, manifest = _run(folder, tmp_path)
    assert _answer(row)["value"] == "FROM-BYTECODE"  # it ran: bytecode alone is importable
    check = _checks(manifest)["code_identified"]
    assert not check["passed"] and "lazy_helper.pyc (sourceless bytecode)" in check["detail"], check
    assert manifest["official_run"] is False


def test_a_stale_unchecked_hash_pycache_beside_a_committed_source_never_runs(tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    _write(folder, LAZY, tmp_path)
    good = "def value():\n    return 'SOURCE'\n"
    stale = tmp_path / "stale" / "lazy_helper.py"
    stale.parent.mkdir()
    stale.write_text(f"def value():\n    open({str(tmp_path / 'PLANTED-COMMAND-RAN')!r}, 'w')\n    return 'STALE'\n")
    cache = folder / "__pycache__" / f"lazy_helper.{sys.implementation.cache_tag}.pyc"
    cache.parent.mkdir(parents=True)
    py_compile.compile(str(stale), cfile=str(cache), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    _repo_with(folder, {"lazy_helper.py": good})  # the bytecode committed too
    control = subprocess.run([sys.executable, "-c", "import lazy_helper; print(lazy_helper.value())"], cwd=folder,
                             capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert control.stdout.strip() == "STALE", control  # the control: plain Python runs the stale bytecode
    (tmp_path / "PLANTED-COMMAND-RAN").unlink()
    row, manifest = _run(folder, tmp_path)
    answer = _answer(row)
    assert answer["value"] == "SOURCE", answer
    assert answer["pycache_prefix"] and not answer["prefix_writable"], answer  # bytecode from a read-only cache only
    assert not (tmp_path / "PLANTED-COMMAND-RAN").exists()
    code = manifest["run_spec"]["agent_code"]
    assert not [f for f in code["closure"]["files"] if "__pycache__" in f["path"]]
    passed, detail = _agent_code_identified(manifest)
    assert passed and f"snapshot {code['snapshot'][:12]}" in detail, detail


def test_an_import_root_above_the_snapshot_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    _write(folder, LAZY, tmp_path)
    (folder / "weights").mkdir()
    (folder / "weights" / "big.bin").write_bytes(b"0" * 300_000)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q0", "question": "What is 2 + 2?", "answer": "4"}) + "\n")
    with OpenAIServer(default=lambda body: Reply(text="Final Answer: 4")) as server:
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", "ident_agent:build", "--model-name",
                   "m", "--base-url", server.base_url, "--output", tmp_path / "r.jsonl", cwd=folder,
                   env={"OPENAI_API_KEY": "sk-test", "QITOS_RUNNER_SNAPSHOT_MB": "0.2",
                        "QITOS_SNAPSHOT_DIR": str(tmp_path / "snapshots")})
        assert not server.requests  # refused before any job
    assert not (tmp_path / "r.jsonl").exists() or not rows(tmp_path / "r.jsonl")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    line = [l for l in done.stderr.splitlines() if "snapshot limit" in l]
    assert len(line) == 1 and "weights 0.3 MiB" in line[0] and "QITOS_RUNNER_SNAPSHOT_MB" in line[0], done.stderr

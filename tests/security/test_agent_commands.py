"""Attacks through `qit demo minimal`: a model that runs hostile commands with the demo's coding agent.

Each test drives the real CLI with a scripted model, so the path is the one a user runs with a real
model: parser -> run_command tool -> bwrap sandbox -> trace writer -> exports.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.security.support import demo, files_containing, need_sandbox, run_cli, tool_outputs


def test_rm_rf_outside_the_workspace_leaves_the_file(tmp_path: Path) -> None:
    need_sandbox()
    hidden = tmp_path / "outside" / "precious.txt"  # under the host's /tmp: not even visible inside
    hidden.parent.mkdir()
    hidden.write_text("keep me")
    # the interpreter's prefix is bound read-only into the sandbox (so `python` works): visible, not writable
    visible = Path(sys.prefix) / f"qitos-victim-{os.getpid()}.txt"
    visible.write_text("keep me too")
    try:
        done, run_dir = demo(tmp_path, [f"rm -rf {hidden} {hidden.parent}; ls {hidden}",
                                        f"cat {visible}; rm -rf {visible} 2>&1",
                                        "rm -rf ~ /tmp/* /root /work /etc/* 2>/dev/null; echo still-here"])
        assert done.returncode == 0, done.stderr
        assert hidden.read_text() == "keep me" and visible.read_text() == "keep me too"
        outputs = tool_outputs(run_dir)
        assert "No such file" in outputs[0]
        assert "keep me too" in outputs[1] and "Read-only file system" in outputs[1]
        assert "still-here" in outputs[2]
        assert (tmp_path / "script.jsonl").exists() and Path("/etc/hostname").exists()
    finally:
        visible.unlink(missing_ok=True)


def test_env_and_printenv_show_no_secret(tmp_path: Path) -> None:
    need_sandbox()
    secrets = {"MY_SERVICE_API_KEY": "sk-pattern-named-0123456789",  # secret by its name
               "OPENROUTER_KEY": "or-any-name-key-9876543210",       # secret only because it is marked
               "PLAIN_SETTING_X": "not-a-secret-but-host-only-42"}  # not secret, but still not inherited
    done, run_dir = demo(tmp_path, ["env", "printenv", "cat /proc/self/environ | tr '\\0' '\\n'"],
                         "--secret-env", "OPENROUTER_KEY", env=secrets)
    assert done.returncode == 0, done.stderr
    outputs = tool_outputs(run_dir)
    assert "PATH=" in outputs[0] and "HOME=/home/sandbox" in outputs[0]
    for name, value in secrets.items():
        assert not any(name in out for out in outputs), f"{name} reached the sandbox"
        assert files_containing(tmp_path, value) == [], f"{name}'s value was written somewhere"


def test_canary_key_under_any_name_is_absent_from_every_file(tmp_path: Path) -> None:
    """The key named by --api-key-env, echoed by a tool and said by the model, in traces and every export."""
    need_sandbox()
    canary = "canary-3f9c2a7e51b84d06"
    env = {"ZZ_WHATEVER_NAME": canary}
    done, run_dir = demo(tmp_path, [f"echo the key is {canary}", f"printf '%s' {canary} > leaked.txt; cat leaked.txt"],
                         "--api-key-env", "ZZ_WHATEVER_NAME", env=env, final=f"the key was {canary}")
    assert done.returncode == 0, done.stderr
    assert canary not in done.stdout and "the key was [REDACTED]" in done.stdout  # the console too
    outputs = tool_outputs(run_dir)
    assert "[REDACTED]" in outputs[0] and "[REDACTED]" in outputs[1]
    exports = tmp_path / "exports"
    for args in (["qitos.cli.qit", "bench", "export", "--run", str(run_dir), "--html", str(exports / "a.html"),
                  "--json", str(exports / "a.json")],
                 ["qitos.cli.qita", "export", "--run", str(run_dir), "--html", str(exports / "b.html")]):
        # the exporting process knows the key's variable only through --secret-env
        ran = run_cli(args[0], *args[1:], *(["--secret-env", "ZZ_WHATEVER_NAME"]), cwd=tmp_path, env=env)
        assert ran.returncode == 0, ran.stderr
    assert {p.name for p in exports.iterdir()} == {"a.html", "a.json", "b.html"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["summary"]["final_result"] == "the key was [REDACTED]"
    # the workspace holds what the agent wrote (that is its file); everything QitOS wrote is clean
    leaks = [p for p in files_containing(tmp_path, canary) if p.name not in ("leaked.txt", "script.jsonl")]
    assert leaks == []


@pytest.mark.parametrize("mechanism", ["detected", "no-cgroup"])
def test_fork_bomb_memory_hog_and_disk_fill_each_end_as_a_tool_error(tmp_path: Path, mechanism: str) -> None:
    """With the cgroups found here, and with the fallback used where none is writable (rlimits, tree count)."""
    need_sandbox()
    from qitos.sandbox.limits import cgroup_support

    support = cgroup_support()  # cgroups where writable, else rlimits and a process-tree count (both tested)
    # With a cgroup the limit is hard, so a real fork bomb is safe to throw. The fallback counts the process tree
    # ten times a second, so it gets a bounded bomb (2000 sleepers, 4x the limit): an unbounded one would run the
    # whole machine out of processes before it is caught, and break everything else running here.
    hard_limit = mechanism == "detected" and support.pids is not None
    bomb = ":(){ :|:& };:; sleep 25" if hard_limit else "for i in $(seq 1 2000); do sleep 30 & done; wait"
    commands = [
        bomb,  # the shell waits, so the bomb has time to grow
        "python3 -c 'b = bytearray(4 * 1024**3); print(len(b))'",
        "i=0; while true; do head -c 50M /dev/zero > /tmp/fill$i || break; i=$((i+1)); done; echo wrote $i",
        "rm -f /tmp/fill*; echo alive",
    ]
    def cgroups(creator: int) -> set[Path]:
        """The sandbox cgroups `creator` made (their names carry its pid): never another run's, such as one that a
        kill test running beside this one (another pytest worker) SIGKILLed before it could remove its own."""
        found = {p for base in {support.pids, support.memory} if base for p in Path(base).glob("qitos-sandbox-*")}
        return {p for p in found if p.name.split("-")[2] == str(creator)}

    started = time.monotonic()
    env = {"QITOS_SANDBOX_DISK": "300M", "QITOS_SANDBOX_MEMORY": "1G"}
    if mechanism == "no-cgroup":
        env["QITOS_SANDBOX_NO_CGROUP"] = "1"
    done, run_dir = demo(tmp_path, commands, env=env)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    outputs = tool_outputs(run_dir)
    bomb, hog, fill, after = outputs
    assert "processes limit reached" in bomb and "none (killed)" in bomb, [o[:60] + " ... " + o[-300:] for o in outputs]
    assert "memory limit reached: the command used more than 1.0 GiB" in hog and "none (killed)" in hog, [o[:60] + " ... " + o[-300:] for o in outputs]
    assert "disk limit reached" in fill and "none (killed)" in fill, [o[:60] + " ... " + o[-300:] for o in outputs]
    assert "alive" in after and "exit code 0" in after, outputs[-1]  # the run went on, the sandbox still works
    assert elapsed < 600, f"the three attacks took {elapsed:.0f} s"  # a hang guard, not a timing claim
    assert "fixed" in done.stdout or "not fixed" in done.stdout  # the demo finished and ran its verify
    qit = json.loads((run_dir / "manifest.json").read_text())["writer"]["pid"]  # the sandbox runs in qit's process
    assert cgroups(qit) == set()  # every command's cgroup was removed

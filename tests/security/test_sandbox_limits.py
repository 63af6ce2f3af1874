"""Sandbox resource limits, one command at a time, with both mechanisms (cgroups and the rlimit fallback)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from qitos.sandbox.bwrap import BwrapSandbox
from qitos.sandbox.limits import SandboxLimits, cgroup_support
from tests.conftest import require_system
from tests.security.support import need_sandbox

SMALL = SandboxLimits(memory_bytes=256 << 20, max_processes=64, file_size_bytes=32 << 20, disk_bytes=96 << 20)


def test_limits_from_env_and_bad_values() -> None:
    limits = SandboxLimits.from_env({"QITOS_SANDBOX_MEMORY": "512M", "QITOS_SANDBOX_PROCESSES": "100",
                                     "QITOS_SANDBOX_FILE_SIZE": "1.5G", "QITOS_SANDBOX_DISK": "3g"})
    assert limits == SandboxLimits(memory_bytes=512 << 20, max_processes=100, file_size_bytes=int(1.5 * (1 << 30)),
                                   disk_bytes=3 << 30)
    assert SandboxLimits.from_env({}) == SandboxLimits()
    with pytest.raises(ValueError, match="QITOS_SANDBOX_MEMORY='lots' is not a size"):
        SandboxLimits.from_env({"QITOS_SANDBOX_MEMORY": "lots"})
    with pytest.raises(ValueError, match="QITOS_SANDBOX_PROCESSES='-1' is not a whole number"):
        SandboxLimits.from_env({"QITOS_SANDBOX_PROCESSES": "-1"})


def test_each_limit_ends_only_its_command(tmp_path: Path) -> None:
    need_sandbox()
    with BwrapSandbox(tmp_path / "work", timeout_seconds=40, limits=SMALL) as box:
        started = time.monotonic()
        file_size = box.run("head -c 100M /dev/zero > big.bin; sleep 20; echo never")
        assert file_size.limit == "file_size" and file_size.exit_code is None
        assert "file size limit reached" in file_size.stderr and "never" not in file_size.stdout
        assert (tmp_path / "work" / "big.bin").stat().st_size <= SMALL.file_size_bytes
        disk = box.run("for i in $(seq 1 20); do head -c 20M /dev/zero > /tmp/part$i; done; echo never")
        assert disk.limit == "disk" and "disk limit reached" in disk.stderr and "never" not in disk.stdout
        cleanup = box.run("rm -f /tmp/part* big.bin; echo cleaned")  # over the limit, cleaning up still works
        assert cleanup.exit_code == 0 and cleanup.stdout == "cleaned\n" and cleanup.limit is None
        if cgroup_support().memory:
            memory = box.run("python3 -c 'x = bytearray(1024**3)'")
            assert memory.limit == "memory" and "memory limit reached" in memory.stderr
        if cgroup_support().pids:
            procs = box.run("for i in $(seq 1 200); do sleep 30 & done; wait")
            assert procs.limit == "processes" and "processes limit reached" in procs.stderr
        ok = box.run("echo fine")
        assert ok.exit_code == 0 and ok.stdout == "fine\n" and ok.limit is None
        assert time.monotonic() - started < 60


def test_rlimit_fallback_without_cgroups(tmp_path: Path) -> None:
    """Where no cgroup is writable: memory falls back to RLIMIT_DATA, processes to a tree count (as root,
    RLIMIT_NPROC alone would not stop a fork bomb). Checked in a fresh process, with cgroups turned off."""
    need_sandbox()
    program = textwrap.dedent(f"""
        from pathlib import Path
        from qitos.sandbox.bwrap import BwrapSandbox
        from qitos.sandbox.limits import SandboxLimits, cgroup_support
        support = cgroup_support()
        assert support.pids is None and support.memory is None, support
        print(support.describe())
        limits = SandboxLimits(memory_bytes=256 << 20, max_processes=64)
        with BwrapSandbox(Path({str(tmp_path / 'work')!r}), timeout_seconds=30, limits=limits) as box:
            hog = box.run("python3 -c 'x = bytearray(1024**3)'")
            print("hog", hog.exit_code, hog.limit, "MemoryError" in hog.stderr, "memory limit reached" in hog.stderr)
            print(box.run("ulimit -d").stdout.strip())
            # bounded, as in test_agent_commands: the tree is counted ten times a second, and in 100 ms an
            # unbounded bomb can take every free pid of the machine (root ignores RLIMIT_NPROC), which made
            # thread creation fail in the next tests of a CI run
            bomb = box.run("for i in $(seq 1 2000); do sleep 30 & done; wait")
            print("bomb", bomb.exit_code, bomb.limit, "processes limit reached" in bomb.stderr, bomb.duration_seconds < 20)
            print(box.run("echo alive").stdout.strip())
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "QITOS_SANDBOX_NO_CGROUP": "1"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "memory: RLIMIT_DATA per process" in lines[0] and "process-tree count" in lines[0]
    # RLIMIT_DATA leaves room for reserved address space (JIT buffers): twice the limit when it is small
    assert lines[1] == "hog None memory True True" and lines[2] == str(512 << 10)
    assert lines[3] == "bomb None processes True True" and lines[4] == "alive"


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_stale_cgroups_of_dead_processes_are_swept(tmp_path: Path) -> None:
    """A process killed outright leaves its commands' cgroups; the next probe removes the empty ones of dead
    processes and nothing else (a live process's, a non-empty one, names that are not ours)."""
    from qitos.sandbox.limits import sweep_stale_cgroups

    dead = _dead_pid()
    stale = [tmp_path / f"qitos-sandbox-{dead}-2-99938444", tmp_path / f"qitos-probe-{dead}-1-5"]
    kept = [tmp_path / f"qitos-sandbox-{os.getpid()}-1-7", tmp_path / f"qitos-sandbox-{dead}-3-8",
            tmp_path / "user.slice"]
    for directory in stale + kept:
        directory.mkdir()
    (tmp_path / f"qitos-sandbox-{dead}-3-8" / "cgroup.procs").write_text("1234\n")  # the kernel refuses a busy one
    assert sweep_stale_cgroups(tmp_path) == 2
    assert not any(d.exists() for d in stale) and all(d.exists() for d in kept)


def test_stale_cgroup_swept_in_the_real_hierarchy() -> None:
    from qitos.sandbox.limits import sweep_stale_cgroups

    support = cgroup_support()
    require_system(bool(support.pids), "a writable pids cgroup (run as root, or delegate one)")
    leftover = Path(support.pids) / f"qitos-sandbox-{_dead_pid()}-1-1"
    leftover.mkdir()
    try:
        assert (leftover / "cgroup.procs").exists()  # a real cgroup, made by the kernel
        assert sweep_stale_cgroups(Path(support.pids)) >= 1
        assert not leftover.exists()
    finally:
        if leftover.exists():
            leftover.rmdir()

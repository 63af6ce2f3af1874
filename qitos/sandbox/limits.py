"""Resource limits for `BwrapSandbox` commands: memory, processes, file size, disk.

Why several mechanisms: the machine QitOS runs on is often a container where everything runs as
root, and root ignores `RLIMIT_NPROC` (the kernel exempts uid 0, and bwrap maps the sandbox user to
the host user that started it). So, per limit, the strongest mechanism available here is used:

- processes and memory: a cgroup per command (v1 `pids`/`memory` hierarchies or a v2 subtree with
  those controllers), when one is writable. Otherwise, for processes, `RLIMIT_NPROC` (which the
  kernel enforces only when the host user is not root) plus a count of the command's process tree
  a few times a second (`count_tree`; the command is killed past the limit), and for memory
  `RLIMIT_DATA` per process. `CgroupSupport.describe()` says which is in use.
- file size: `RLIMIT_FSIZE` (enforced for root too): a bigger write fails with EFBIG / SIGXFSZ.
- disk: the bytes the commands add to the work dir, /tmp and $HOME are measured while a command
  runs (a few times a second); past the limit the command is killed.

Reaching a limit ends that command (the whole process tree) and the result says which limit it was.
Defaults can be changed per sandbox (`SandboxLimits`) or for a whole run with environment variables
`QITOS_SANDBOX_MEMORY`, `QITOS_SANDBOX_PROCESSES`, `QITOS_SANDBOX_FILE_SIZE`, `QITOS_SANDBOX_DISK`
(sizes accept K, M, G suffixes, e.g. `4G`).
"""

from __future__ import annotations

import functools
import os
import re
import signal
import stat
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field

from qitos.trace.liveness import pid_alive

GIB = 1 << 30
# RLIMIT_DATA counts address space a process reserves, not only what it uses: JIT engines reserve their code
# buffer up front (unicorn, which pwntools loads, takes about 1 GiB), so the rlimit fallback allows up to this
# much beyond the memory limit (never more than the limit itself again). A cgroup, when there is one, limits
# what is really used.
DATA_RESERVE_BYTES = 1 * GIB
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
ENV_VARIABLES = {"memory_bytes": "QITOS_SANDBOX_MEMORY", "max_processes": "QITOS_SANDBOX_PROCESSES",
                 "file_size_bytes": "QITOS_SANDBOX_FILE_SIZE", "disk_bytes": "QITOS_SANDBOX_DISK"}


def parse_size(text: str, what: str) -> int:
    """'512M' -> bytes; a bad value is a one-line error naming `what` and the expected form."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{what}={text!r} is not a size; use bytes or a number with K, M or G, e.g. 2G")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


class SandboxLimits(BaseModel):
    """Per-command limits. Wall time and output size stay `BwrapSandbox` arguments, as before."""

    memory_bytes: int = Field(default=2 * GIB, ge=16 << 20)
    max_processes: int = Field(default=512, ge=8)
    file_size_bytes: int = Field(default=1 * GIB, ge=1 << 20)
    disk_bytes: int = Field(default=2 * GIB, ge=1 << 20)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SandboxLimits:
        """Defaults, overridden by the `QITOS_SANDBOX_*` variables that are set."""
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for field, variable in ENV_VARIABLES.items():
            raw = env.get(variable, "").strip()
            if not raw:
                continue
            if field == "max_processes":
                if not raw.isdigit():
                    raise ValueError(f"{variable}={raw!r} is not a whole number of processes, e.g. 512")
                values[field] = int(raw)
            else:
                values[field] = parse_size(raw, variable)
        try:
            return cls(**values)
        except ValueError as exc:
            first = str(exc).splitlines()
            raise ValueError(f"sandbox limits from {', '.join(ENV_VARIABLES.values())}: "
                             f"{' '.join(first[1:3]) if len(first) > 2 else exc}") from None

    @property
    def data_rlimit_bytes(self) -> int:
        """RLIMIT_DATA of the fallback: the memory limit plus room for reserved address space."""
        return self.memory_bytes + min(DATA_RESERVE_BYTES, self.memory_bytes)

    def ulimit_script(self, cgroup: CgroupSupport) -> str:
        """Shell lines setting the rlimits in the sandbox (hard and soft, so the command cannot raise them)."""
        lines = [f"ulimit -H -S -f {max(1, self.file_size_bytes // 1024)}"]
        if not cgroup.memory:
            lines.append(f"ulimit -H -S -d {max(1, self.data_rlimit_bytes // 1024)}")
        if not cgroup.pids:
            lines.append(f"ulimit -H -S -u {self.max_processes}")
        return " && ".join(lines)


class CgroupSupport(BaseModel):
    """Where per-command cgroups can be made (None when that controller is not writable here)."""

    version: int | None = None
    pids: str | None = None
    memory: str | None = None

    def describe(self) -> str:
        parts = []
        parts.append(f"processes: cgroup v{self.version} pids.max" if self.pids else
                     "processes: RLIMIT_NPROC (the kernel skips it for root) and a process-tree count")
        parts.append(f"memory: cgroup v{self.version} memory limit" if self.memory else
                     "memory: RLIMIT_DATA per process (the limit plus up to 1 GiB of reserved address space)")
        return "; ".join(parts)


def _own_paths() -> dict[str, str]:
    paths: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    except (OSError, ValueError):
        pass
    return paths


def _try_child(parent: Path, needed: str) -> bool:
    """Can we make a child cgroup under `parent` that has `needed` (a control file name)?"""
    # unique per call: a name shared by two probes (threads, or a reused pid's leftover) made one fail
    probe = parent / f"qitos-probe-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / needed).exists()
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


_OWN_CGROUP = re.compile(r"qitos-(?:sandbox|probe)-(\d+)-")


def sweep_stale_cgroups(parent: Path) -> int:
    """Remove empty QitOS cgroups left under `parent` by processes that no longer exist; how many went.

    A process killed outright (SIGKILL, a crash) cannot remove its commands' cgroups; the next QitOS process
    clears them when it probes. Only empty ones can be removed (the kernel refuses the others).
    """
    removed = 0
    try:
        children = list(parent.iterdir())
    except OSError:
        return 0
    for child in children:
        found = _OWN_CGROUP.match(child.name)
        if found is None or pid_alive(int(found.group(1))):
            continue
        try:
            child.rmdir()
            removed += 1
        except OSError:
            pass
    return removed


_PROBE_LOCK = threading.Lock()
if hasattr(os, "register_at_fork"):  # a worker forked while another thread probed must not inherit a held lock
    os.register_at_fork(after_in_child=lambda: globals().update(_PROBE_LOCK=threading.Lock()))


def cgroup_support() -> CgroupSupport:
    """Probe once per process which cgroup controllers we may use for sandboxed commands.

    Commands start on many threads at once; the first probe holds the lock, so every command sees the same
    answer (two racing probes once left one command with the rlimit fallback while its neighbours had cgroups).
    """
    with _PROBE_LOCK:
        return _probe_cgroups()


@functools.lru_cache(maxsize=1)
def _probe_cgroups() -> CgroupSupport:
    if os.environ.get("QITOS_SANDBOX_NO_CGROUP") == "1":  # forces the rlimit fallback (tests, debugging)
        return CgroupSupport()
    own = _own_paths()
    if (_CGROUP_ROOT / "cgroup.controllers").exists() and "" in own:  # pure cgroup v2
        base = _CGROUP_ROOT / own[""].lstrip("/")
        if _try_child(base, "pids.max") and _try_child(base, "memory.max"):
            sweep_stale_cgroups(base)
            return CgroupSupport(version=2, pids=str(base), memory=str(base))
        return CgroupSupport()
    found: dict[str, str] = {}
    for name, control in (("pids", "pids.max"), ("memory", "memory.limit_in_bytes")):
        base = _CGROUP_ROOT / name / own.get(name, "/").lstrip("/")
        if _try_child(base, control):
            found[name] = str(base)
            sweep_stale_cgroups(base)
    return CgroupSupport(version=1 if found else None, **found)


class CommandCgroup:
    """The cgroup(s) of one command: created before it starts, read while it runs, removed after."""

    _counter = 0

    def __init__(self, support: CgroupSupport, limits: SandboxLimits) -> None:
        CommandCgroup._counter += 1
        name = f"qitos-sandbox-{os.getpid()}-{CommandCgroup._counter}-{time.monotonic_ns() % 10**9}"
        self.version = support.version
        self.dirs: list[Path] = []
        self.pids_dir = self.memory_dir = None
        if support.version == 2 and support.pids:
            self.pids_dir = self.memory_dir = self._make(Path(support.pids) / name)
            (self.pids_dir / "pids.max").write_text(str(limits.max_processes))
            (self.memory_dir / "memory.max").write_text(str(limits.memory_bytes))
            if (self.memory_dir / "memory.swap.max").exists():
                (self.memory_dir / "memory.swap.max").write_text("0")
        elif support.version == 1:
            if support.pids:
                self.pids_dir = self._make(Path(support.pids) / name)
                (self.pids_dir / "pids.max").write_text(str(limits.max_processes))
            if support.memory:
                self.memory_dir = self._make(Path(support.memory) / name)
                (self.memory_dir / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))

    def _make(self, path: Path) -> Path:
        path.mkdir()
        self.dirs.append(path)
        return path

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    @staticmethod
    def _counter_of(path: Path, key: str) -> int:
        try:
            for line in path.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def hit(self) -> str | None:
        """Which limit the command ran into so far: 'processes', 'memory' or None."""
        if self.pids_dir is not None and self._counter_of(self.pids_dir / "pids.events", "max"):
            return "processes"
        if self.memory_dir is not None:
            events = "memory.events" if self.version == 2 else "memory.oom_control"
            if self._counter_of(self.memory_dir / events, "oom_kill"):
                return "memory"
        return None

    def kill_all(self) -> None:
        for directory in self.dirs:
            kill_file = directory / "cgroup.kill"
            if kill_file.exists():
                try:
                    kill_file.write_text("1")
                    continue
                except OSError:
                    pass
            try:
                pids = [int(p) for p in (directory / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                continue
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def remove(self) -> None:
        """Kill what is left and remove the cgroups (retrying while the last processes exit)."""
        deadline = time.monotonic() + 5
        for directory in self.dirs:
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill_all()
                    time.sleep(0.05)


# What programs print when an allocation fails (Python, glibc/coreutils, C++, Node, Java, Go).
_OUT_OF_MEMORY = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "JavaScript heap out of memory",
                  "OutOfMemoryError", "out of memory")


def rlimit_memory_hit(exit_code: int | None, stderr: str) -> bool:
    """Without a memory cgroup, RLIMIT_DATA makes allocations fail: did this failed command say so?"""
    return exit_code not in (0, None) and any(marker in stderr[-4000:] for marker in _OUT_OF_MEMORY)


def count_tree(root_pid: int, stop_after: int) -> int:
    """Processes in the tree under `root_pid` (itself included), counting no further than `stop_after` + 1.

    Used where no pids cgroup is writable. The sandbox has its own pid namespace, so orphans are
    re-parented to its init, which is inside this tree: nothing escapes the count.
    """
    seen = 0
    pending = [root_pid]
    while pending and seen <= stop_after:
        pid = pending.pop()
        seen += 1
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as handle:
                    pending.extend(int(child) for child in handle.read().split())
            except (OSError, ValueError):
                continue
    return seen


def disk_usage(paths: list[Path], big: float = float("inf")) -> tuple[int, set[str]]:
    """(bytes of disk used under `paths`, the regular files of `big` bytes or more).

    Disk use is st_blocks, so sparse files count for what they really take.
    """
    total = 0
    found: set[str] = set()
    pending = [str(p) for p in paths]
    while pending:
        current = pending.pop()
        try:
            entries = os.scandir(current)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    pending.append(entry.path)
                elif stat.S_ISREG(st.st_mode) and st.st_size >= big:
                    found.add(entry.path)
    return total, found


class DiskWatch:
    """Disk use of a sandbox's writable places during one command.

    `disk`: more than `disk_bytes` added since the sandbox was made, counting only growth during this
    command (so a command that cleans up after an earlier fill is not killed). `file_size`: a file
    reached `file_size_bytes` during this command (RLIMIT_FSIZE stopped the writer; this ends the rest).
    """

    def __init__(self, paths: list[Path], baseline: int, limits: SandboxLimits) -> None:
        self.paths, self.limits = paths, limits
        total, self.big_before = disk_usage(paths, limits.file_size_bytes)
        self.floor = max(baseline + limits.disk_bytes, total)

    def check(self) -> str | None:
        total, big = disk_usage(self.paths, self.limits.file_size_bytes)
        if big - self.big_before:
            return "file_size"
        if total > self.floor:
            return "disk"
        return None


LIMIT_MESSAGES = {
    "memory": "the command used more than {memory} of memory",
    "processes": "the command tried to run more than {processes} processes at once",
    "file_size": "a file grew to {file_size}, the largest allowed (the write was stopped)",
    "disk": "the command wrote more than {disk} to the work dir, /tmp and $HOME (delete files to go on)",
}


def human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def limit_message(limit: str, limits: SandboxLimits) -> str:
    text = LIMIT_MESSAGES[limit].format(memory=human(limits.memory_bytes), processes=limits.max_processes,
                                        disk=human(limits.disk_bytes), file_size=human(limits.file_size_bytes))
    return f"[sandbox] {limit.replace('_', ' ')} limit reached: {text}; the command was ended"

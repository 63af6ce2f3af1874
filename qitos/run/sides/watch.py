"""The scoring side's watch over one task's agent processes: its limits, measured from outside the agent's reach.

The job's child says hello first; its pid comes from the socket's credentials (the kernel's word, in
this process's PID namespace), never from a message. Before the job is sent, the child is placed in a
cgroup of its own when this machine lets QitOS make one (pids and memory: the kernel refuses the
fork or reclaims/kills past the limit, and counts each hit). Then, a few times a second while the job
runs, the watch reads what the cgroup counted and, from /proc: the task's processes and threads (where
no pids cgroup counts them), their memory (where no memory cgroup does), their CPU time together, and
(task mode) whether a file in the task's private /tmp or /dev/shm reached the file-size limit
(RLIMIT_FSIZE stopped its writer there). A hit kills the task: every process in the job's process tree
(the job's process is a subreaper, so the task's orphans stay in it) and in its cgroup. `--agent-processes batch` has no
per-task processes to watch: no limit but the asset quotas applies there.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import stat
import struct
import threading
import time
from pathlib import Path

from qitos.sandbox.limits import CommandCgroup, SandboxLimits, cgroup_support
from qitos.run.sides.limits import AgentLimits

POLL_SECONDS = 0.25
FILE_SCAN_SECONDS = 1.0
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def read_hello(sock: socket.socket, timeout: float) -> int:
    """The job child's first byte and its pid (SO_PASSCRED must be set on `sock` before the child sends)."""
    poll = select.poll()  # a wait, not a switch of the socket's mode (two system calls fewer per job)
    poll.register(sock, select.POLLIN)
    if not poll.poll(max(0.0, timeout) * 1000):
        raise socket.timeout("the agent side's job did not say hello in time")
    data, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(12))
    if data != b"P":
        raise ConnectionError("the agent side's job did not start")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            return struct.unpack("3i", payload[:12])[0]
    raise ConnectionError("the agent side's hello carried no credentials")


def _tree(root: int) -> list[int]:
    out, pending = [], [root]
    while pending and len(out) < 100_000:
        pid = pending.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as handle:
                    pending.extend(int(c) for c in handle.read().split())
        except (OSError, ValueError):
            continue
    return out


def _stat(pid: int) -> tuple[float, int, int]:
    """(CPU seconds including reaped children, resident bytes, threads) of one process; zeros once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
        with open(f"/proc/{pid}/statm") as handle:
            resident = int(handle.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0.0, 0, 0
    return sum(int(f) for f in fields[11:15]) / _TICK, resident, int(fields[17])


def _big_file(root_fd: int, limit: int, budget: list[int]) -> bool:
    """Is there a regular file of `limit` bytes or more below this directory? Walked by descriptor, never
    following a link the agent planted; at most `budget[0]` entries."""
    try:
        entries = list(os.scandir(root_fd))
    except OSError:
        return False
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            return False
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size >= limit:
            return True
        if stat.S_ISDIR(st.st_mode):
            try:
                fd = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
            except OSError:
                continue
            try:
                if _big_file(fd, limit, budget):
                    return True
            finally:
                os.close(fd)
    return False


def _started(pid: int) -> str | None:
    """A process's start time (clock ticks since boot): with its pid, what names it (a pid alone can be reused)."""
    try:  # os.read: three system calls, where open() and a text read take nine
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.read(fd, 4096).rpartition(b")")[2].split()[19].decode()
        finally:
            os.close(fd)
    except (OSError, IndexError):
        return None


def _live(status: bytes) -> bool:
    """A process's /proc/PID/status: neither a zombie nor exiting (its address space released)?"""
    state = status.partition(b"\nState:")[2].split(maxsplit=1)[:1]
    return bool(state) and state[0] not in (b"Z", b"X") and b"\nVmSize:" in status


class TaskWatch:
    """One task's limits; `per_task` False (batch mode): nothing to watch."""

    def __init__(self, pid: int | None, limits: AgentLimits, per_task: bool, private_world: bool) -> None:
        self.pid, self.limits, self.private_world = pid, limits, private_world
        self.active = per_task and pid is not None
        self.cgroup: CommandCgroup | None = None
        self.hit: str | None = None
        self._next = self._next_scan = 0.0
        self.started = _started(pid) if pid is not None else None  # names the process (running())
        if self.active:
            support = cgroup_support()
            if support.pids or support.memory:
                try:
                    self.cgroup = CommandCgroup(support, SandboxLimits(
                        memory_bytes=limits.memory_bytes, max_processes=limits.max_processes))
                    for procs in self.cgroup.procs_files():
                        Path(procs).write_text(str(pid))
                except (OSError, ValueError):
                    if self.cgroup is not None:
                        self.cgroup.remove()
                    self.cgroup = None

    @property
    def memory_rlimit(self) -> bool:
        """Does the agent side limit memory with RLIMIT_DATA (no memory cgroup here)?"""
        return self.cgroup is None or self.cgroup.memory_dir is None

    def job_limits(self) -> dict:
        return {**self.limits.record(), "rlimit_memory": self.memory_rlimit} if self.active else {}

    def check(self, now: float | None = None, force: bool = False) -> str | None:
        """The limit the task reached ('memory', 'processes', 'file_size', 'cpu_time'), killing it; else None."""
        now = time.monotonic() if now is None else now
        if self.hit or not self.active or (now < self._next and not force):
            return self.hit
        self._next = now + POLL_SECONDS
        hit = self.cgroup.hit() if self.cgroup is not None else None
        if hit is None:
            hit = self._measure(now, force)
        if hit is not None:
            self.hit = hit
            self.kill()
        return self.hit

    def _measure(self, now: float, force: bool) -> str | None:
        assert self.pid is not None
        if not self._same():
            return None  # the task's process has ended: nothing left to measure
        pids = _tree(self.pid)
        cpu = resident = threads = 0
        for pid in pids:
            seconds, rss, count = _stat(pid)
            cpu, resident, threads = cpu + seconds, resident + rss, threads + count
        if (self.cgroup is None or self.cgroup.pids_dir is None) and max(threads, len(pids)) > self.limits.max_processes:
            return "processes"
        if self.memory_rlimit and resident > self.limits.memory_bytes:
            return "memory"
        if cpu > self.limits.cpu_seconds:
            return "cpu_time"
        if self.private_world and (force or now >= self._next_scan):
            self._next_scan = now + FILE_SCAN_SECONDS
            if self._file_too_big():
                return "file_size"
        return None

    def _file_too_big(self) -> bool:
        for place in ("tmp", "dev/shm"):
            try:
                fd = os.open(f"/proc/{self.pid}/root/{place}", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:  # the task has ended, or this process may not look into it (not root)
                continue
            try:
                if _big_file(fd, self.limits.file_size_bytes, [20_000]):
                    return True
            finally:
                os.close(fd)
        return False

    def running(self) -> bool:
        """Is the job's process (a task's child, or the batch process) still running: not a zombie, and not on its
        way out? A process that exits releases its memory before it closes its files, so one whose socket closed
        as it died (killed with its host) has no address space left (no `VmSize`) though it is not a zombie yet."""
        if not self._same():
            return False
        try:
            with open(f"/proc/{self.pid}/status", "rb") as handle:
                return _live(handle.read())
        except OSError:
            return False

    def _same(self) -> bool:
        """Is the watched pid still the task's process (not gone, not reused by another)?"""
        return self.pid is not None and self.started is not None and _started(self.pid) == self.started

    def kill(self) -> None:
        """End every process of the task: its process tree, leaves first, and what its cgroup holds."""
        if not self.active or not self._same():
            if self.cgroup is not None:
                self.cgroup.kill_all()
            return
        for pid in reversed(_tree(self.pid)):  # the job's process is a subreaper: the task's orphans are in it
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def close(self) -> None:
        """After the job (its outcome received): nothing of the task may outlive it, and its cgroup goes (on a
        thread: removal waits for the killed processes to be gone, and the next task need not wait for that)."""
        if not self.active:
            return
        for pid in reversed(_tree(self.pid)) if self._same() else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.cgroup is not None:
            threading.Thread(target=self.cgroup.remove, name="qitos-task-cgroup", daemon=True).start()

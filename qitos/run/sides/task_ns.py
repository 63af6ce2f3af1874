"""One task's own world in the agent host (`--agent-processes task`): its processes, its writable places, its limits.

Done in the job's child before any agent code runs, while it still holds CAP_SYS_ADMIN in the host's user
namespace (`zygote.isolate_child` then drops it):

- `enter()`: a mount namespace of its own, and the job's process a subreaper (orphans of the task stay in
  its process tree, so the scoring side finds and ends every process of the task).
- `private_world()`: in that namespace, `/`, `/dev` and everything else the confinement shows are read-only, and `/tmp` (work dir, home, TMPDIR) and `/dev/shm` are fresh tmpfs mounts of this task
  alone. Read-only binds the confinement placed under /tmp (a `--runner`'s folder there) are moved onto
  the new /tmp (open_tree/move_mount, Linux 5.2+; older kernels: /tmp read-only, a fresh tmpfs on /tmp/work).
  A note left anywhere is gone for the next task.
- `set_rlimits()`: per-process backstops (file size, CPU time, and memory where no cgroup limits it).
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
from pathlib import Path
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, PR_SET_CHILD_SUBREAPER = 0x00020000, 36
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 0x4000, 1 << 18, 1 << 21
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # the same number on every architecture (new syscall table)
OPEN_TREE_CLONE, AT_RECURSIVE, MOVE_MOUNT_F_EMPTY_PATH, AT_FDCWD = 1, 0x8000, 4, -100
# statvfs flags -> the mount flags a bind remount must keep (the kernel refuses to clear locked ones)
_KEEP = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
         (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (4096, MS_RELATIME))
WORK = Path("/tmp/work")


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                       flags, data.encode() if data else None), f"mount {target}")


def enter() -> None:
    """A mount namespace of the task's own, and the job's process made a subreaper: what the task starts and
    leaves behind stays in its process tree, which the scoring side watches and kills as a whole.

    Not a PID namespace: the confinement's /proc (covered entries) cannot be replaced by a fresh one, and with
    a /proc of another namespace, programs that look themselves up there by pid (a nested bwrap) hang."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")


def _submounts(root: str) -> list[str]:
    """Mount points strictly under `root`, outermost only (their own submounts move with them)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split(" ")[4])  # \040: a space
        if point.startswith(root.rstrip("/") + "/"):
            points.append(point)
    return [p for p in sorted(set(points)) if not any(p.startswith(o + "/") for o in points if o != p)]


def _remount_read_only(path: str) -> None:
    flags = os.statvfs(path).f_flag
    keep = sum(ms for st, ms in _KEEP if flags & st)
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


def private_world(tmpfs_bytes: int) -> None:
    """This task's private writable places (see the module docstring); `tmpfs_bytes` bounds each tmpfs."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    size = f"size={max(1, tmpfs_bytes // 1024)}k"
    try:
        _fresh_tmp(size)
    except OSError:  # no open_tree/move_mount here (kernel < 5.2): /tmp stays, read-only, with a fresh work dir
        WORK.mkdir(exist_ok=True)
        _mount("tmpfs", str(WORK), "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,{size}")
        _remount_read_only("/tmp")
    else:
        WORK.mkdir(mode=0o700)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,{size}")
    for path in ("/", "/dev"):
        _remount_read_only(path)


def _fresh_tmp(size: str) -> None:
    """A fresh tmpfs on /tmp, with the read-only binds the confinement placed under it moved onto it."""
    kept = []
    try:
        for point in _submounts("/tmp"):
            fd = _libc.syscall(SYS_OPEN_TREE, AT_FDCWD, point.encode(), OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC)
            _check(fd, f"open_tree {point}")
            kept.append((point, os.path.isdir(point), fd))
    except OSError:
        for _, _, fd in kept:
            os.close(fd)
        raise
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,{size}")
    for point, is_dir, fd in kept:
        if is_dir:
            os.makedirs(point, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(point), exist_ok=True)
            open(point, "a").close()
        _check(_libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, point.encode(), MOVE_MOUNT_F_EMPTY_PATH),
               f"move_mount {point}")
        os.close(fd)


def set_rlimits(limits: dict[str, Any], memory_rlimit: bool) -> None:
    """Hard per-process limits the agent cannot raise. CPU time: the scoring side ends the task when its
    processes together pass the limit; this stops a single process a little later if that watch were late."""
    def both(kind: int, value: int) -> None:
        resource.setrlimit(kind, (value, value))

    both(resource.RLIMIT_FSIZE, int(limits["file_size_bytes"]))
    cpu = int(limits["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu + 2, cpu + 5))
    if memory_rlimit:  # no memory cgroup for the task: allocations past the limit fail (MemoryError)
        both(resource.RLIMIT_DATA, int(limits["memory_bytes"]))

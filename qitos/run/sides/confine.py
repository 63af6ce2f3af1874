"""The agent host's confinement: a bubblewrap command line, built from what the agent side may see.

Visible, read-only: the system (/usr, /lib*, a few /etc entries), the Python installation and its
site-packages, QitOS's own package directory, and the `--runner`'s import root. Not visible: the data
dir, the tasks file, the results file and the trace dir (masked even when they sit inside a visible
directory), the rest of the host. Private: /tmp (per job, see `zygote.py`), a PID namespace of its
own (the scoring process is not in it), IPC and UTS namespaces. The network is the host's only when
the agent side needs it (a model endpoint, the task's services, the web); otherwise only a private
loopback.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Iterable

from qitos.sandbox.bwrap import _ETC_ENTRIES, _NETWORK_ETC_ENTRIES, _system_mounts
from qitos.sandbox.masks import mask_args

AGENT_UID = 1000


@functools.lru_cache(maxsize=1)
def confinement_status() -> tuple[bool, str, bool]:
    """(available, why not / what, per-job private mounts possible) for this machine."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "bubblewrap (`bwrap`) is not installed (Debian: apt install bubblewrap)", False
    base = [bwrap, "--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session", *_system_mounts(),
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    probe = ["--", "/bin/sh", "-c", "exit 0"]
    try:
        plain = subprocess.run([*base, *probe], capture_output=True, text=True, timeout=20)
        if plain.returncode != 0:
            return False, f"bwrap cannot create the agent's namespaces here: {plain.stderr.strip()[:200]}", False
        caps = subprocess.run([*base, "--cap-add", "CAP_SYS_ADMIN", *probe], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap did not run: {exc}", False
    return True, f"bwrap {bwrap}", caps.returncode == 0


def python_paths() -> list[str]:
    """What the interpreter and its installed packages need, read-only."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        value = sysconfig.get_paths().get(key)
        if value:
            paths.add(value)
    import qitos

    paths.add(str(Path(qitos.__file__).resolve().parent))
    return sorted(p for p in paths if os.path.exists(p))


def _inside(path: str, roots: Iterable[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in map(os.path.realpath, roots))


def host_argv(*, python_ro: list[str], extra_ro: list[str], hidden: list[str], network: bool,
              private_mounts: bool, rw: list[str] = (),
              snapshot: tuple[str, str, list[str]] | None = None) -> list[str]:
    """The bwrap options (without the command) for the agent host.

    `snapshot` (copy, live root, top-level names): the `--runner`'s import root is shown as a read-only folder
    holding only the copy's entries (`code_snapshot`), never the live folder; other binds inside it still land."""
    args = ["bwrap", "--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--hostname", "agent", "--die-with-parent", "--new-session"]
    if private_mounts:
        args += ["--cap-add", "CAP_SYS_ADMIN"]  # only for each job's private /tmp; every job drops it at once
    if not network:
        args.append("--unshare-net")
    args += _system_mounts()
    # Root-only entries are masked in what the agent's own binds show (a runner's import root); not in the
    # system's /usr and /etc entries, which hold no gold and would take a second to scan in every process.
    read_only: list[str] = []
    for name in _ETC_ENTRIES + (_NETWORK_ETC_ENTRIES if network else ()):
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    if snapshot is not None:
        copy, root, entries = snapshot
        args += ["--tmpfs", root]
        for name in entries:
            args += ["--ro-bind", os.path.join(copy, name), os.path.join(root, name)]
    for path in python_ro:  # the interpreter and packages: nothing of the host's secrets, not scanned (seconds)
        args += ["--ro-bind", path, path]
    for path in extra_ro:
        args += ["--ro-bind", path, path]
        read_only.append(path)
    for path in rw:
        args += ["--bind", path, path]
    args += mask_args(read_only)
    visible = [*python_ro, *extra_ro, *rw]
    for path in hidden:  # masked where a visible directory would show them (never a directory the agent needs)
        if not os.path.exists(path) or not _inside(path, visible) or any(_inside(v, [path]) for v in visible):
            continue
        args += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
    if snapshot is not None:
        args += ["--remount-ro", snapshot[1]]  # after every bind inside it made its mount point
    return args

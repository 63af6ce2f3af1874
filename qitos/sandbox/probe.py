"""Can bubblewrap build the command sandbox on this machine? Probed once per process, with the fix when it cannot.

Each namespace the sandbox needs is tried on its own, so the reason names the missing feature (user namespaces
switched off, a container without CLONE_NEWPID, an old bwrap) and what would enable it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

SANDBOX_UID = 1000
_INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: `apt install bubblewrap`; Fedora: `dnf install bubblewrap`)"
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or cannot create the namespaces the sandbox needs on this machine."""


def _proc_args() -> list[str]:
    """A fresh /proc for the command's pid namespace; inside the confined agent host (a sandbox already), the
    host's own /proc read-only: the kernel refuses a new procfs under bwrap's locked /proc overmounts, and the
    agent host's /proc shows only agent-side processes."""
    if os.environ.get("QITOS_AGENT_SIDE") == "1":
        return ["--ro-bind", "/proc", "/proc"]
    return ["--proc", "/proc"]


def _probe_args(bwrap: str, extra: Sequence[str]) -> list[str]:
    return [bwrap, *_system_mounts(), *_proc_args(), "--dev", "/dev", *extra, "--", "/bin/sh", "-c", "exit 0"]


def _run_probe(bwrap: str, extra: Sequence[str]) -> tuple[bool, str]:
    try:
        proc = subprocess.run(_probe_args(bwrap, extra), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr.strip()


_REQUIRED_FEATURES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("user namespaces", ("--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)),
     "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
     "user.max_user_namespaces>0), or run the container with --privileged / a seccomp profile that allows unshare"),
    ("pid namespaces", ("--unshare-user", "--unshare-pid"), "the container must allow CLONE_NEWPID"),
    ("network namespaces", ("--unshare-user", "--unshare-net"), "the container must allow CLONE_NEWNET"),
    ("ipc/uts namespaces", ("--unshare-user", "--unshare-ipc", "--unshare-uts"),
     "the container must allow CLONE_NEWIPC/NEWUTS"),
    ("--die-with-parent / --new-session", ("--unshare-user", "--die-with-parent", "--new-session"),
     "upgrade bubblewrap to 0.4 or newer"),
)


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str, bool]:
    """(ok, reason, supports --disable-userns); cached because the host does not change under us."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, f"bubblewrap (`bwrap`) is not on PATH; {_INSTALL_HINT}", False
    for feature, args, fix in _REQUIRED_FEATURES:
        ok, err = _run_probe(bwrap, args)
        if not ok:
            return False, f"bwrap at {bwrap} cannot use {feature} here ({err or 'no message'}); {fix}", False
    disable_userns, _ = _run_probe(bwrap, ("--unshare-user", "--disable-userns"))
    return True, f"bwrap at {bwrap} works (user, pid, net, ipc, uts namespaces)", disable_userns


def _system_mounts() -> list[str]:
    """Read-only /usr plus /bin, /lib* mirrored as symlinks or binds, exactly as the host has them."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args

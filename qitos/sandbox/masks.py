"""Masks for a sandbox's read-only binds: what "other" users may not read is hidden inside.

Only needed when bwrap runs as host root: its sandboxed processes are root too and would read root-only files
(`/usr/share/polkit-1/rules.d`, a key under `/etc`) that an unprivileged user could not. Each such directory
becomes an empty read-only tmpfs, each such file `/dev/null`.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Sequence


@functools.lru_cache(maxsize=64)
def _root_only_entries(top: str) -> tuple[tuple[str, bool], ...]:
    """(path, is_dir) under `top` that "other" users may not read; scanned once per process, by find(1) where
    there is one (half the time of the walk below over /usr: every CyBench sandbox binds it)."""
    finder = shutil.which("find")
    if finder:
        try:
            done = subprocess.run([finder, top, "-mindepth", "1", "(", "-type", "d", "!", "-perm", "-o=rx",
                                   "-printf", "d%p\\0", "-prune", ")", "-o", "(", "-type", "f", "!", "-perm", "-o=r",
                                   "-printf", "f%p\\0", ")"], capture_output=True, timeout=120)
            if done.returncode == 0:
                items = [item for item in done.stdout.decode("utf-8", "surrogateescape").split("\0") if item]
                return tuple(sorted((item[1:], item[0] == "d") for item in items))
        except (OSError, subprocess.TimeoutExpired):
            pass
    return _walk_root_only(top)


def _walk_root_only(top: str) -> tuple[tuple[str, bool], ...]:
    found: list[tuple[str, bool]] = []
    pending = [top]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if not (mode & stat.S_IROTH and mode & stat.S_IXOTH):
                    found.append((entry.path, True))
                else:
                    pending.append(entry.path)
            elif stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                found.append((entry.path, False))
    return tuple(sorted(found))


def mask_args(sources: Sequence[str]) -> list[str]:
    """Hide root-only entries of read-only binds; only needed when bwrap runs as host root."""
    if os.geteuid() != 0:
        return []
    args: list[str] = []
    for source in sources:
        if not os.path.isdir(source):
            if os.path.isfile(source) and not os.stat(source).st_mode & stat.S_IROTH:
                args += ["--ro-bind", "/dev/null", source]
            continue
        for path, is_dir in _root_only_entries(os.path.realpath(source)):
            shown = source + path[len(os.path.realpath(source)):]
            args += ["--tmpfs", shown, "--remount-ro", shown] if is_dir else ["--ro-bind", "/dev/null", shown]
    return args

"""Atomic file replacement that reuses the old file instead of deleting it.

`os.replace(tmp, target)` frees the old target's inode on every rewrite. A run rewrites its manifest at
start, after every step and at the end, and on ext4 every freed inode is skipped as "recently deleted"
by later file creations for a minute or more: thousands of short runs turn each `open(O_CREAT)` into a
long scan (measured with `perf`: most of the kernel time of a 512-run batch). Linux's
`renameat2(RENAME_EXCHANGE)` swaps the two names atomically instead, so the old manifest becomes the
next temporary file and no inode is freed. Elsewhere (or on filesystems without it) this falls back to
`os.replace`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_renameat2 = None
_supported = sys.platform.startswith("linux")


def _load() -> bool:
    global _renameat2, _supported
    if _renameat2 is None and _supported:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError):
            _supported = False
    return _supported


def exchange(source: Path, target: Path) -> bool:
    """Atomically swap the two existing files' names; False when the system cannot (use `os.replace`)."""
    if not _load():
        return False
    assert _renameat2 is not None
    if _renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False  # this filesystem cannot exchange; the caller replaces instead
    raise OSError(code, os.strerror(code), str(source), None, str(target))

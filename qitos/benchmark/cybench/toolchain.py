"""Scoring side (the sandbox's mounts). The CyBench CTF toolchain: a pinned Python environment mounted read-only into the task sandbox.

Why: upstream runs agents in a Kali image that already has pwntools, pycryptodome, sympy, z3 and
friends; the sandbox only sees the host's ``/usr``, whose ``python3`` has none of them, so crypto
and pwn tasks could not be solved. ``install`` builds a venv from the sandbox's own ``python3``
(the first one on the sandbox PATH, under ``/usr``) and installs ``toolchain.txt`` (every
distribution pinned) from PyPI. The runtime binds the venv read-only at its host path and puts
its ``bin/`` first on the sandbox PATH, so ``python``, ``python3``, ``pip`` and the packages'
console scripts (``checksec``, ``ROPgadget``) are the toolchain's.

Where: ``$QITOS_TOOLCHAIN_DIR`` if set, else ``<data_dir>/cybench-toolchain``. The venv is
``<dir>/venv``; ``<dir>/toolchain.json`` is written last, so a half-finished install never reads
as present, and it records the lock's sha256, so an edited lock reads as stale.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from qitos.sandbox.bwrap import SANDBOX_PATH, remove_tree

if TYPE_CHECKING:
    from qitos.benchmark.cybench.options import CybenchOptions

TOOLCHAIN_ENV = "QITOS_TOOLCHAIN_DIR"
MARKER = "toolchain.json"
INSTALL_HINT = "run `qit data fetch cybench --toolchain`"


class ToolchainError(RuntimeError):
    """The toolchain could not be installed (message says which step failed and why)."""


@dataclass(frozen=True)
class ToolchainStatus:
    """Whether the toolchain at `path` is installed and matches the pinned lock."""

    path: Path
    present: bool
    detail: str

    @property
    def venv(self) -> Path:
        return self.path / "venv"

    @property
    def bin_dir(self) -> Path:
        return self.venv / "bin"


def lock_text() -> str:
    return resources.files("qitos.benchmark.cybench").joinpath("toolchain.txt").read_text()


def lock_sha256() -> str:
    return hashlib.sha256(lock_text().encode()).hexdigest()


def toolchain_dir(data_dir: Path | str) -> Path:
    """$QITOS_TOOLCHAIN_DIR, else <data_dir>/cybench-toolchain."""
    env = os.environ.get(TOOLCHAIN_ENV, "").strip()
    return Path(env).expanduser().resolve() if env else Path(data_dir).expanduser().resolve() / "cybench-toolchain"


def sandbox_python() -> str | None:
    """The `python3` commands in the sandbox resolve to (without the toolchain)."""
    return shutil.which("python3", path=SANDBOX_PATH)


def status(path: Path) -> ToolchainStatus:
    marker = path / MARKER
    if not marker.is_file():
        return ToolchainStatus(path, False, f"no CyBench toolchain at {path}; {INSTALL_HINT}")
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError) as exc:
        return ToolchainStatus(path, False, f"{marker} unreadable ({exc}); {INSTALL_HINT}")
    if info.get("lock_sha256") != lock_sha256():
        return ToolchainStatus(path, False, f"toolchain at {path} is from another lock (stale); {INSTALL_HINT}")
    if not (path / "venv" / "bin" / "python3").exists():
        return ToolchainStatus(path, False, f"{path / 'venv'} is incomplete; {INSTALL_HINT}")
    return ToolchainStatus(path, True, f"toolchain at {path} ({info.get('packages', '?')} packages, "
                                       f"python {info.get('python', '?')}, lock {info['lock_sha256'][:12]})")


def find(data_dir: Path | str) -> ToolchainStatus:
    return status(toolchain_dir(data_dir))


def resolve_toolchain(opts: "CybenchOptions", data_dir: Path | str) -> Path | None:
    """The toolchain venv the sandbox gets (``--option toolchain``): none when off or (auto) not installed."""
    if opts.toolchain == "off":
        return None
    if opts.toolchain != "auto":
        return Path(opts.toolchain)
    found = find(data_dir)
    return found.venv if found.present else None


def install(path: Path, log: Callable[[str], None] = lambda _m: None, *, force: bool = False) -> ToolchainStatus:
    """Create `<path>/venv` from the sandbox's python3 and pip-install the pinned lock into it."""
    current = status(path)
    if current.present and not force:
        log(current.detail + " (already installed)")
        return current
    python = sandbox_python()
    if python is None:
        raise ToolchainError(f"no python3 under {SANDBOX_PATH}: the sandbox has no Python to build the toolchain on "
                             "(Debian: apt install python3 python3-venv)")
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).unlink(missing_ok=True)
    venv = path / "venv"
    remove_tree(venv)
    start = time.monotonic()
    log(f"creating {venv} with {python}")
    _run([python, "-m", "venv", str(venv)], "create the venv (Debian: apt install python3-venv)")
    lock = path / "toolchain.txt"
    lock.write_text(lock_text())
    log(f"installing {lock} from PyPI (about 700 MB; a minute or two)")
    _run([str(venv / "bin" / "python3"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "--only-binary", ":all:", "--no-input", "-r", str(lock)], "pip install the toolchain")
    version = subprocess.run([str(venv / "bin" / "python3"), "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    packages = sum(1 for line in lock_text().splitlines() if "==" in line and not line.startswith("#"))
    info = {"lock_sha256": lock_sha256(), "python": version, "base_python": python, "packages": packages,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "install_seconds": round(time.monotonic() - start, 1), "installer_python": sys.version.split()[0]}
    tmp = path / (MARKER + ".tmp")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, path / MARKER)
    done = status(path)
    log(done.detail)
    return done


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise ToolchainError(f"could not {what}: `{' '.join(argv[:4])} ...` exited {proc.returncode}\n{tail}")

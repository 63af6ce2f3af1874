"""Where a run came from: QitOS's own version and commit, the agent code's identity, dependency versions.

The commit recorded is that of the checkout QitOS runs from (an editable install), never of the
directory the user happens to run in: a run outside any repository can be official, and an empty
`git init` proves nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

KEY_DEPENDENCIES = ("pydantic", "openai", "httpx", "llama-cpp-python", "ray")


@lru_cache(maxsize=1)
def package_version() -> str:
    try:
        return metadata.version("qitos")
    except metadata.PackageNotFoundError:
        from qitos import __version__

        return __version__


@lru_cache(maxsize=8)
def git_state(cwd: str | None = None) -> tuple[str | None, bool | None]:
    """(SHA, dirty) of the repository containing `cwd`, or (None, None) outside a repository."""
    where = cwd or str(Path.cwd())
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=where, capture_output=True, text=True, timeout=10
        )
        return sha.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


@lru_cache(maxsize=1)
def is_package_install() -> bool:
    """True when qitos is installed as a regular (non-editable) distribution."""
    try:
        dist = metadata.distribution("qitos")
    except metadata.PackageNotFoundError:
        return False
    direct = dist.read_text("direct_url.json") or ""
    return '"editable": true' not in direct.replace(" ", "").replace('"editable":true', '"editable": true')


@lru_cache(maxsize=1)
def dependency_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for name in KEY_DEPENDENCIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@lru_cache(maxsize=4)
def _environment_summary(executor: str) -> tuple:
    return (("python", platform.python_version()), ("platform", f"{sys.platform}-{platform.machine()}"),
            ("qitos", package_version()), ("executor", executor))


def environment_summary(executor: str = "local") -> dict[str, object]:
    """Python, platform, QitOS and key dependency versions (computed once per process)."""
    return {**dict(_environment_summary(executor)), "dependencies": dict(dependency_versions())}


@lru_cache(maxsize=1)
def qitos_checkout() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout QitOS is imported from; (None, None) for a regular install."""
    import qitos

    package_dir = Path(qitos.__file__).resolve().parent
    if is_package_install() or not (package_dir.parent / ".git").exists():
        return None, None
    return git_state(str(package_dir.parent))


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=16)
def module_identity(module: str) -> dict[str, object]:
    """sha256 of a `--runner` module's file and the commit and dirty state of the repository holding it."""
    spec = importlib.util.find_spec(module)
    origin = Path(spec.origin).resolve() if spec and spec.origin and spec.origin not in ("built-in", "frozen") else None
    if origin is None or not origin.is_file():
        return {"module": module, "file": None, "sha256": None, "repo_commit": None, "repo_dirty": None}
    commit, dirty = git_state(str(origin.parent))
    if commit is not None:  # dirty means: this file, or any tracked file of its repository, differs from HEAD
        status = subprocess.run(["git", "status", "--porcelain", "--", str(origin)], cwd=str(origin.parent),
                                capture_output=True, text=True, timeout=10)
        dirty = bool(dirty) or bool(status.stdout.strip())
    return {"module": module, "file": str(origin), "sha256": _file_sha256(origin), "repo_commit": commit,
            "repo_dirty": dirty}

"""Where a run came from: git state of the working directory, package and dependency versions."""

from __future__ import annotations

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

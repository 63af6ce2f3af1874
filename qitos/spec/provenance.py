"""Where a run came from: QitOS's own version and commit, the agent code's identity, dependency versions.

The commit recorded is that of the checkout QitOS runs from (an editable install), never of the
directory the user happens to run in: a run outside any repository can be official, and an empty
`git init` proves nothing. A checkout is dirty when a tracked file differs from its commit or an untracked
(not ignored) .py file sits inside the package, where an import would pick it up: then the commit does not
say what ran.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from . import safe_git
from .code_identity import file_states, module_file, porcelain, work_tree_of

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
    top = work_tree_of(Path(cwd or Path.cwd()))  # git is told never to look above the repository's top
    if top is None:
        return None, None
    where = str(top)
    try:
        sha = safe_git.run(where, "rev-parse", "HEAD", reads_work_tree=False, timeout=5)
        if sha.returncode != 0:
            return None, None
        return sha.stdout.strip(), bool(porcelain(where, "--untracked-files=no"))
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return None, None


@lru_cache(maxsize=1)
def is_package_install() -> bool:
    """True when the qitos imported is a regular (non-editable) installed distribution's own files; a
    source tree put first on the path (PYTHONPATH) beside an installed qitos is not identified by its version."""
    try:
        dist = metadata.distribution("qitos")
    except metadata.PackageNotFoundError:
        return False
    direct = (dist.read_text("direct_url.json") or "").replace(" ", "")
    if '"editable":true' in direct:
        return False
    import qitos

    try:
        return Path(str(dist.locate_file("qitos/__init__.py"))).resolve() == Path(qitos.__file__).resolve()
    except (OSError, TypeError, ValueError):
        return False


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


@dataclass(frozen=True)
class CheckoutState:
    """A source checkout's commit and what differs from it: tracked files changed (anywhere in the
    checkout) and untracked, not ignored .py files inside the package, which an import would pick up."""

    root: str
    commit: str | None
    modified: tuple[str, ...] = ()
    untracked: tuple[str, ...] = ()
    error: str | None = None

    @property
    def dirty(self) -> bool | None:
        if self.commit is None:
            return None
        return bool(self.modified or self.untracked or self.error)

    def describe(self, limit: int = 3) -> str:
        """Up to `limit` of the differing files, e.g. 'qitos/a.py (modified), qitos/b.py (untracked), and 2 more'."""
        names = [f"{n} (modified)" for n in self.modified] + [f"{n} (untracked)" for n in self.untracked]
        if self.error:
            names.insert(0, f"git status failed: {self.error}")
        more = len(names) - limit
        return ", ".join(names[:limit]) + (f", and {more} more" if more > 0 else "")


def checkout_state(root: Path | str, package: str = "qitos") -> CheckoutState:
    """The state of the checkout at `root` whose package directory is `root/package` (three git calls).

    Parameterized by root so that any checkout laid out like QitOS's can be checked, not only the running one.
    """
    root = str(root)
    try:
        head = safe_git.run(root, "rev-parse", "-q", "--verify", "HEAD^{commit}", reads_work_tree=False, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return CheckoutState(root=root, commit=None)
    if head.returncode != 0:
        return CheckoutState(root=root, commit=None)
    commit = head.stdout.strip()
    try:
        modified = tuple(name for _, name in porcelain(root, "--untracked-files=no"))
        others = safe_git.run(root, "ls-files", "-z", "--others", "--exclude-standard", "--", package)
        if others.returncode != 0:
            raise RuntimeError(others.stderr.strip() or "git ls-files failed")
        untracked = tuple(sorted(n for n in others.stdout.split("\0") if n.endswith(".py")))
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:  # unknown state: reported, and dirty
        return CheckoutState(root=root, commit=commit, error=str(exc) or type(exc).__name__)
    return CheckoutState(root=root, commit=commit, modified=modified, untracked=untracked)


@lru_cache(maxsize=1)
def qitos_checkout_state() -> CheckoutState | None:
    """The checkout QitOS is imported from (computed once per process); None for a regular install."""
    import qitos

    package_dir = Path(qitos.__file__).resolve().parent
    if is_package_install() or not (package_dir.parent / ".git").exists():
        return None
    return checkout_state(package_dir.parent, package_dir.name)


def qitos_checkout() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout QitOS is imported from; (None, None) for a regular install."""
    state = qitos_checkout_state()
    return (None, None) if state is None or state.commit is None else (state.commit, state.dirty)


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=16)
def module_identity(module: str) -> dict[str, object]:
    """sha256 of a `--runner` module's file and the commit and dirty state of the repository holding it.

    The file is found by path (`code_identity.module_file`), never by importing: finding a submodule
    through the import system imports its parent packages, which would run the runner's code here.
    Dirty means: the file is not committed as it is (modified, untracked or git-ignored), or a tracked
    file of its repository differs from HEAD.
    """
    origin = module_file(module)
    if origin is None:
        return {"module": module, "file": None, "sha256": None, "repo_commit": None, "repo_dirty": None}
    commit, dirty = git_state(str(origin.parent))
    if commit is not None:
        entry = file_states([origin])["files"][0]
        dirty = bool(dirty) or entry["state"] != "clean"
    return {"module": module, "file": str(origin), "sha256": _file_sha256(origin), "repo_commit": commit,
            "repo_dirty": dirty}


def snapshot_module_identity(module: str, snapshot: dict[str, object]) -> dict[str, object]:
    """`module_identity` for a runner the agent host runs from a snapshot (`code_snapshot.identity`): the module's
    file found in the live root without importing it, its sha256 and state those of the snapshot's copy. No git
    runs here: the snapshot's identification already placed every file in its repository."""
    root = str(snapshot.get("root") or "")
    origin = module_file(module, [root]) if root else None
    files = snapshot.get("files") if isinstance(snapshot.get("files"), list) else []
    entry = next((f for f in files if origin is not None and f.get("path") == str(origin)), None)
    if entry is None:
        return {"module": module, "file": str(origin) if origin else None, "sha256": None, "repo_commit": None,
                "repo_dirty": None, "snapshot": snapshot.get("snapshot")}
    return {"module": module, "file": entry["path"], "sha256": entry.get("sha256"), "repo_commit": entry.get("commit"),
            "repo_dirty": (entry.get("state") != "clean") if entry.get("commit") else None,
            "snapshot": snapshot.get("snapshot")}

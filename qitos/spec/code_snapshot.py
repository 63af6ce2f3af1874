"""What a `--runner` can import, copied by the scoring side before the first job: the agent runs that copy.

The agent's identity is then the scoring side's own fact, not the agent's account of what it imported: the
copy is taken from the runner's import root (the `sys.path` entry holding its top-level module) before the
agent host starts, kept content-addressed and read-only (`<cache>/<sha256>/`), and the agent host mounts it
in place of the live folder. Whatever the agent imports, at describe time or lazily mid-run, comes from the
copy that was identified. It holds everything Python can import from the root: each top-level file, and each
folder whose name can be imported (a package, or a namespace package) with every file in it, sources,
bytecode, extension modules and data alike. Left out: dot entries, `__pycache__` folders (the agent host reads
no bytecode beside sources), virtual environments, and what the agent must not see (data dir, tasks, results,
traces: `exclude`), each listed in `Snapshot.left_out`.

Code the copy cannot show as source, sourceless bytecode (`x.pyc` outside `__pycache__`) and extension
modules, is marked by `kind` and fails `code_identified` by name (`official._closure_findings`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any, Iterable

from qitos.trace.durability import fsync_path

from .code_identity import file_states

MAX_BYTES = 64 * 1024 * 1024  # a runner's import root larger than this is refused (QITOS_RUNNER_SNAPSHOT_MB)
MAX_FILES = 20_000
LIMIT_ENV = "QITOS_RUNNER_SNAPSHOT_MB"
CACHE_ENV = "QITOS_SNAPSHOT_DIR"


class SnapshotRefused(ValueError):
    """The import root cannot be snapshot (too large, unreadable): the message says what to do."""


@dataclass(frozen=True)
class Snapshot:
    root: str  # the live import root: where the agent host shows the copy
    digest: str  # sha256 over (path, sha256, executable) of every file: the RunSpec's `agent_code.snapshot`
    directory: str  # the read-only copy
    files: tuple[tuple[str, str, int], ...]  # (path relative to root, sha256, size), sorted
    left_out: tuple[str, ...] = field(default=())  # "rel (why)"
    total_bytes: int = 0

    def entries(self) -> list[str]:
        """The copy's top-level names (what the agent host binds into the root)."""
        return sorted({rel.split("/", 1)[0] for rel, _, _ in self.files})


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qitos" / "runner-snapshots"


def max_bytes() -> int:
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return MAX_BYTES
    try:
        value = float(raw)
    except ValueError:
        raise SnapshotRefused(f"{LIMIT_ENV}={raw!r} must be a number of MiB") from None
    return int(value * 1024 * 1024)


def kind(rel: str) -> str:
    """source, bytecode (sourceless), extension (an extension module) or data."""
    name = rel.rsplit("/", 1)[-1]
    if name.endswith(".py"):
        return "source"
    if name.endswith(".pyc"):
        return "bytecode"
    if any(name.endswith(suffix) for suffix in EXTENSION_SUFFIXES):
        return "extension"
    return "data"


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def _listing(root: Path, exclude: list[Path]) -> tuple[list[tuple[str, Path, int]], list[str]]:
    """(rel, file to read, size) of what goes into the copy, and what was left out, from lstat alone."""
    files: list[tuple[str, Path, int]] = []
    left_out: list[str] = []
    hide_root_only = os.geteuid() == 0  # the agent host masks root-only files of its binds; so does the copy
    seen: set[Path] = set()  # folders visited (a link back up must not loop)

    def visit(path: Path, rel: str, top: bool) -> None:
        name = path.name
        if name.startswith(".") or name == "__pycache__":
            return
        try:
            info = path.lstat()
            real = path.resolve()
        except (OSError, RuntimeError):
            left_out.append(f"{rel} (unreadable)")
            return
        if _inside(real, exclude):
            left_out.append(f"{rel} (hidden from the agent: data, tasks, results or traces)")
            return
        if stat.S_ISLNK(info.st_mode):
            try:
                info = real.stat()
            except OSError:
                left_out.append(f"{rel} (a broken link)")
                return
            if stat.S_ISDIR(info.st_mode) and not real.is_relative_to(root):
                left_out.append(f"{rel} (a link to a folder outside the import root)")
                return
        if stat.S_ISDIR(info.st_mode):
            if (top and not name.isidentifier()) or real in seen:
                return  # not importable, or already copied
            seen.add(real)
            if (path / "pyvenv.cfg").exists():
                left_out.append(f"{rel} (a virtual environment)")
                return
            try:
                children = sorted(path.iterdir())
            except OSError:
                left_out.append(f"{rel} (unreadable)")
                return
            for child in children:
                visit(child, f"{rel}/{child.name}", False)
        elif stat.S_ISREG(info.st_mode):
            if hide_root_only and not info.st_mode & stat.S_IROTH:
                left_out.append(f"{rel} (readable by root only)")
                return
            files.append((rel, path, info.st_size))

    for child in sorted(root.iterdir()):
        visit(child, child.name, True)
    return files, left_out


def _too_large(root: Path, files: list[tuple[str, Path, int]], limit: int) -> str:
    by_top: dict[str, int] = {}
    for rel, _, size in files:
        by_top[rel.split("/", 1)[0]] = by_top.get(rel.split("/", 1)[0], 0) + size
    biggest = sorted(by_top.items(), key=lambda kv: -kv[1])[:3]
    named = ", ".join(f"{name} {size / 2**20:.1f} MiB" for name, size in biggest)
    total = sum(size for _, _, size in files)
    return (f"the --runner's import root {root} holds {total / 2**20:.1f} MiB in {len(files)} importable files "
            f"(largest: {named}), over the snapshot limit of {limit / 2**20:g} MiB and {MAX_FILES} files: run the "
            f"runner from a folder holding only the agent's code, or raise {LIMIT_ENV}")


def take(root: str | Path, exclude: Iterable[str | Path] = (), cache: Path | None = None) -> Snapshot:
    """Copy what Python can import from `root` into `<cache>/<digest>/` (reused when it exists); see the module."""
    root = Path(root).resolve()
    if root in (Path("/"), Path("/tmp")):  # the agent host's own /tmp and / cannot be replaced by a read-only copy
        raise SnapshotRefused(f"the --runner's import root is {root}: run the runner from a folder of its own")
    limit = max_bytes()
    # an excluded path holding the root (a results file beside the runner, in the root) cannot hide the root whole
    hidden = [p for p in (Path(e).resolve() for e in exclude if e) if not root.is_relative_to(p)]
    files, left_out = _listing(root, hidden)
    if sum(size for _, _, size in files) > limit or len(files) > MAX_FILES:
        raise SnapshotRefused(_too_large(root, files, limit))
    cache = (cache or cache_root()).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=cache))
    recorded: list[tuple[str, str, int]] = []
    lines: list[list[Any]] = []
    total = 0
    try:
        for rel, source, _ in files:
            try:  # read once: the bytes hashed are the bytes copied
                data = source.read_bytes()
                executable = bool(source.stat().st_mode & stat.S_IXUSR)
            except OSError as exc:
                left_out.append(f"{rel} (unreadable: {exc.strerror or exc})")
                continue
            total += len(data)
            if total > limit:
                raise SnapshotRefused(_too_large(root, files, limit))
            sha = hashlib.sha256(data).hexdigest()
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o555 if executable else 0o444)
            recorded.append((rel, sha, len(data)))
            lines.append([rel, sha, executable])
        digest = hashlib.sha256(json.dumps(lines, separators=(",", ":")).encode()).hexdigest()
        final = cache / digest
        for directory, _, names in os.walk(staging, topdown=False):
            # on disk before it is used: every trace of the batch keeps these files as links (`record_closure`),
            # and a row's commit flushes those links' names, not the content they share
            for name in names:
                fsync_path(os.path.join(directory, name))
            os.chmod(directory, 0o555)
            fsync_path(directory)
        if not final.exists():
            try:
                staging.rename(final)
            except OSError:  # another process put the same copy there first
                if not final.is_dir():
                    raise
            fsync_path(str(cache))
    finally:
        if staging.exists():
            _remove(staging)
    return Snapshot(root=str(root), digest=digest, directory=str(final), files=tuple(recorded),
                    left_out=tuple(left_out), total_bytes=total)


def _remove(path: Path) -> None:
    for directory, _, _ in os.walk(path):
        os.chmod(directory, 0o755)
    shutil.rmtree(path, ignore_errors=True)


def identity(snapshot: Snapshot) -> dict[str, Any]:
    """The snapshot as the RunSpec records it (`agent_code["closure"]`): every file with its kind, sha256 and
    state in the root's repository, judged on the copy's bytes (what the agent runs), never the live file's."""
    root, copy = Path(snapshot.root), Path(snapshot.directory)
    sources = {root / rel: copy / rel for rel, _, _ in snapshot.files}
    found = file_states(list(sources), sources=sources)
    kinds = {str(root / rel): kind(rel) for rel, _, _ in snapshot.files}
    for entry in found["files"]:
        entry["kind"] = kinds.get(entry["path"], "data")
    return {"root": snapshot.root, "snapshot": snapshot.digest, "bytes": snapshot.total_bytes, **found,
            "left_out": list(snapshot.left_out)}

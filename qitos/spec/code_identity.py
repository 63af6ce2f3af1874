"""The agent's code, identified from the scoring side: which files it ran, their hashes, their repositories' state.

The agent process reports its import closure as file paths; everything here works from those paths alone
and never imports them (importing the agent's modules would run third-party code in the scoring process).
Files of the installed environment (stdlib, site-packages, the virtual environment) are identified by the
environment's versions and QitOS's own files by its own check, so only the rest are hashed, placed in their
git repositories and, with `store_sources`, copied into the trace.

The closure (`closure_identity`'s result, kept as `RunSpec.agent_code["closure"]`)::

    {"files": [{"path": "/abs/helper.py", "sha256": "<64 hex>" | None, "size": 123 | None,
                "repo": "/abs/repo" | None, "commit": "<40 hex>" | None,
                "state": "clean" | "modified" | "untracked" | "no_repository" | "unreadable"}, ...],
     "repositories": [{"toplevel": "/abs/repo", "commit": "<40 hex>" | None, "files": ["/abs/helper.py", ...],
                       "error": "<git's message>" (only when git could not read it)}, ...],
     "skipped": {"environment": 12, "qitos": 40}}

`clean`: its bytes are the blob HEAD holds at its path. `modified`: HEAD holds another blob there (a file
committed through a filter also reads as modified). `untracked`: not in HEAD (untracked, git-ignored or only
staged). `no_repository`: in no git work tree (or one git cannot read); identified by its sha256 alone.
`unreadable`: the scoring side cannot read it. Files are grouped by repository (sorted by repository, then path).
States come from the repository's objects (`git rev-parse`, `git ls-tree`) and the file's own blob hash: git
never reads the work tree here, so nothing a repository's config names (fsmonitor, filters, hooks) runs; every
call goes through `safe_git`. A `--runner`'s files are identified this way from its snapshot (`code_snapshot`),
never from paths the agent side reports.
"""

from __future__ import annotations

import hashlib
import os
import re
import site
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from functools import lru_cache
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from qitos.trace.durability import write_flushed

from . import safe_git

MAX_STORED_BYTES = 2 * 1024 * 1024  # sources larger than this are hashed but not copied into the trace
STORE_DIR = "agent_code"
_GIT_BATCH = 400  # pathspecs per `git ls-tree` call (keeps the command line short)


def module_file(module: str, search_path: Sequence[str] | None = None) -> Path | None:
    """The file `module` would be imported from, found without importing anything (not even its parents).

    Searches `search_path` (default: sys.path, then the current directory, which `python -m` and the
    `qit` CLI put on the path) with the installed path hooks, as the import system's path finder does
    (regular packages before namespace portions), then, for the top-level name only, the other installed
    meta-path finders (e.g. editable installs). A package's `__init__` that rewrites its `__path__` at
    import time is not followed. None for built-in, frozen or missing modules.
    """
    locations: list[str] | None = [*(sys.path if search_path is None else search_path),
                                   *([os.getcwd()] if search_path is None else [])]
    origin: str | None = None
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        if locations is None:  # a parent that is a plain module has no submodules
            return None
        name = ".".join(parts[:depth])
        found = _find(name, locations)
        if found is None and depth == 1:
            found = _meta_path_find(name)
        if found is None:
            return None
        origin, locations = found
    if not origin or origin in ("built-in", "frozen") or not Path(origin).is_file():
        return None
    return Path(origin).resolve()


def _path_finder(entry: str):
    cached = sys.path_importer_cache.get(entry)
    if cached is not None:
        return cached
    for hook in sys.path_hooks:
        try:
            return hook(entry or os.getcwd())
        except ImportError:
            continue
    return None


def _find(name: str, locations: Sequence[str]) -> tuple[str | None, list[str] | None] | None:
    """(origin, submodule search locations) of `name` in `locations`, as PathFinder finds it but without
    reading parents from sys.modules (PathFinder's namespace paths do, which needs them imported)."""
    portions: list[str] = []
    for entry in locations:
        finder = _path_finder(entry) if isinstance(entry, str) else None
        if finder is None or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec(name)
        except (ImportError, OSError, ValueError):
            continue
        if spec is None:
            continue
        if spec.loader is not None:
            locations_ = spec.submodule_search_locations
            return spec.origin, (list(locations_) if locations_ is not None else None)
        portions.extend(spec.submodule_search_locations or [])
    return (None, portions) if portions else None


def _meta_path_find(name: str) -> tuple[str | None, list[str] | None] | None:
    for finder in sys.meta_path:
        if finder is PathFinder or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec(name, None)
        except Exception:  # a broken third-party finder must not break identification  # noqa: BLE001
            continue
        if spec is not None:
            locations = spec.submodule_search_locations
            return spec.origin, (list(locations) if locations is not None else None)
    return None


@lru_cache(maxsize=1)
def _environment_roots() -> tuple[tuple[Path, ...], Path]:
    """Library directories of the running Python, and QitOS's package directory.

    A virtual environment's prefix is taken whole (it holds nothing but the environment); a base prefix
    such as /usr or /usr/local only through its library directories, since it also holds user code
    (e.g. /usr/src/app).
    """
    import qitos

    roots: set[str] = set()
    paths = sysconfig.get_paths()
    roots.update(paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(key))
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
                                     "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix})
    roots.update(base[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if base.get(key))
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # some embedded interpreters lack it
        pass
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        roots.add(site.getusersitepackages())
    if sys.prefix != sys.base_prefix:
        roots.update({sys.prefix, sys.exec_prefix})
    resolved = tuple(sorted({Path(r).resolve() for r in roots if r}))
    return resolved, Path(qitos.__file__).resolve().parent


def _kind(path: Path) -> str:
    """'qitos', 'environment' or 'agent' for a resolved path."""
    roots, qitos_dir = _environment_roots()
    if path.is_relative_to(qitos_dir):
        return "qitos"
    if {"site-packages", "dist-packages"} & set(path.parts) or any(path.is_relative_to(r) for r in roots):
        return "environment"
    return "agent"


def _resolved(paths: Iterable[str | Path]) -> list[Path]:
    out: set[Path] = set()
    for raw in paths:
        text = str(raw)
        if not text or text.startswith("<"):  # "<frozen ...>", "<string>": no file
            continue
        out.add(Path(os.path.abspath(text)).resolve())
    return sorted(out)


def outside_environment(paths: Iterable[str | Path]) -> list[Path]:
    """The files (resolved, deduplicated, sorted) that are neither the installed environment's nor QitOS's own."""
    return [p for p in _resolved(paths) if _kind(p) == "agent"]


def _git(top: Path | str, *args: str, reads_work_tree: bool = False) -> subprocess.CompletedProcess:
    """Every git call of identification: hardened (`safe_git`), object reads by default."""
    return safe_git.run(top, *args, reads_work_tree=reads_work_tree)


def _candidate_tree(directory: Path, seen: dict[Path, Path | None]) -> Path | None:
    """The nearest ancestor holding `.git` (a directory, or a file for worktrees and submodules)."""
    chain: list[Path] = []
    found: Path | None = None
    for d in (directory, *directory.parents):
        if d in seen:
            found = seen[d]
            break
        chain.append(d)
        if (d / ".git").exists():
            found = d
            break
    for d in chain:
        seen[d] = found
    return found


def work_tree_of(directory: Path) -> Path | None:
    """The nearest folder at or above `directory` holding `.git`: where git is told to stop looking."""
    return _candidate_tree(Path(directory).resolve(), {})


def porcelain(top: Path | str, *args: str) -> list[tuple[str, str]]:
    """(XY, path relative to the work tree) from `git status --porcelain -z`; raises on git errors."""
    done = _git(top, "status", "--porcelain=v1", "-z", "--ignore-submodules=all", *args, reads_work_tree=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[0] if done.stderr.strip() else "git status failed")
    fields = done.stdout.split("\0")
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        out.append((code, name))
        if code[0] in "RC":  # a rename or copy is followed by its source path
            i += 1
    return out


def _repository(top: Path, files: list[Path], sources: dict[Path, Path] | None = None
                ) -> tuple[dict[str, Any], dict[Path, str]]:
    """One repository's record and each file's state, from its objects alone: HEAD's tree (`git ls-tree`) against
    each file's own blob hash. Git never looks at the work tree here, so no fsmonitor, filter or hook of the
    repository's config can run; a file committed through a filter reads as modified (fails closed)."""
    record: dict[str, Any] = {"toplevel": str(top), "commit": None, "files": [str(f) for f in files]}
    try:
        level = _git(top, "rev-parse", "--show-toplevel")
        if level.returncode != 0:
            raise RuntimeError(level.stderr.strip().splitlines()[0] if level.stderr.strip() else "not a work tree")
        real_top = Path(level.stdout.strip()).resolve()
        head = _git(top, "rev-parse", "-q", "--verify", "HEAD^{commit}")
        record["commit"] = (head.stdout.strip() or None) if head.returncode == 0 else None
        rel = {f: f.relative_to(real_top).as_posix() for f in files}
        committed: dict[str, tuple[str, str]] = {}
        if record["commit"]:
            names = list(rel.values())
            for start in range(0, len(names), _GIT_BATCH):
                listed = _git(real_top, "ls-tree", "-r", "-z", "--full-tree", record["commit"], "--",
                              *names[start:start + _GIT_BATCH])
                if listed.returncode != 0:
                    raise RuntimeError(listed.stderr.strip().splitlines()[0] if listed.stderr.strip()
                                       else "git ls-tree failed")
                for entry in listed.stdout.split("\0"):
                    meta, _, name = entry.partition("\t")
                    if name and len(meta.split()) == 3:
                        mode, _kind_, obj = meta.split()
                        committed[name] = (mode, obj)
        fmt = _git(real_top, "rev-parse", "--show-object-format")
        algorithm = fmt.stdout.strip() if fmt.returncode == 0 and fmt.stdout.strip() else "sha1"
    except (OSError, ValueError, RuntimeError, subprocess.SubprocessError) as exc:
        record["error"] = str(exc) or type(exc).__name__
        return record, {f: "no_repository" for f in files}
    read = sources or {}
    return record, {f: _object_state(read.get(f, f), committed.get(name), algorithm) for f, name in rel.items()}


def _object_state(path: Path, committed: tuple[str, str] | None, algorithm: str) -> str:
    """clean / modified / untracked: the blob hash of `path`'s bytes against the object HEAD holds for it."""
    if committed is None:
        return "untracked"  # not in HEAD: untracked, git-ignored or only staged
    mode, obj = committed
    if not mode.startswith("100"):  # a symlink or submodule in HEAD where a regular file is now
        return "modified"
    try:
        data = path.read_bytes()
    except OSError:
        return "modified"
    return "clean" if blob_id(data, algorithm) == obj else "modified"


def blob_id(data: bytes, algorithm: str = "sha1") -> str:
    """Git's object id of a blob holding `data` (what `git hash-object --no-filters` prints)."""
    return hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest()


def _hash(path: Path) -> tuple[str | None, int | None]:
    try:
        digest = hashlib.sha256()
        size = 0
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        return digest.hexdigest(), size
    except OSError:
        return None, None


def file_states(paths: Iterable[str | Path], sources: dict[Path, Path] | None = None) -> dict[str, Any]:
    """`closure_identity` without the environment filter: hash every given file and place it in its repository.

    `sources` (absolute path -> file to read instead, e.g. a snapshot's copy): the paths are taken as given
    (not resolved) and each is judged on its source's bytes."""
    files = sorted(sources) if sources is not None else _resolved(paths)
    seen: dict[Path, Path | None] = {}
    groups: dict[Path | None, list[Path]] = {}
    for f in files:
        groups.setdefault(_candidate_tree(f.parent, seen), []).append(f)
    repositories: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    for top in sorted(groups, key=lambda t: (t is None, str(t))):
        members = groups[top]
        if top is None:
            record, states = None, {f: "no_repository" for f in members}
        else:
            record, states = _repository(top, members, sources)
            repositories.append(record)
        in_repo = record is not None and "error" not in record
        for f in members:
            sha, size = _hash((sources or {}).get(f, f))
            entries.append({"path": str(f), "sha256": sha, "size": size,
                            "repo": record["toplevel"] if in_repo else None,
                            "commit": record["commit"] if in_repo else None,
                            "state": states[f] if sha is not None else "unreadable"})
    return {"files": entries, "repositories": repositories}


def closure_identity(paths: Iterable[str | Path]) -> dict[str, Any]:
    """Identify the agent's import closure (module file paths) as documented above; never imports them."""
    resolved = _resolved(paths)
    kinds = [_kind(p) for p in resolved]
    identity = file_states([p for p, k in zip(resolved, kinds) if k == "agent"])
    identity["skipped"] = {"environment": kinds.count("environment"), "qitos": kinds.count("qitos")}
    return identity


def _safe_name(index: int, path: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "_", Path(path).name).lstrip(".") or "file"
    return f"{index:03d}_{base}"


def store_sources(run_dir: Path, identity: dict[str, Any], copy: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Copy each closure file into `<run_dir>/agent_code/<nnn>_<basename>` (nnn: its index in
    `identity["files"]`, so names never collide and no path from the closure decides where a copy goes).

    `copy` (live root, snapshot folder): each file under the root is the snapshot's copy (what ran), hard-linked
    when it can be (else copied); only sources (`kind` "source") are stored, other kinds listed with their sha256.
    Returns the manifest listing [{path, stored_as (relative to run_dir, or None), sha256 (of the bytes stored,
    else of the file), note (only when something is off)}]. Files over MAX_STORED_BYTES and unreadable ones are
    listed, not stored. Writes nothing outside run_dir and follows no symlink there.
    """
    root = Path(run_dir).resolve()
    target = root / STORE_DIR
    if target.is_symlink():
        raise ValueError(f"{target} is a symlink: refusing to store agent sources through it")
    target.mkdir(parents=True, exist_ok=True)
    listing: list[dict[str, Any]] = []
    for index, entry in enumerate(identity.get("files") or []):
        path = str(entry.get("path"))
        item: dict[str, Any] = {"path": path, "stored_as": None, "sha256": entry.get("sha256")}
        size = entry.get("size")
        if entry.get("kind", "source") != "source":
            item["kind"] = entry.get("kind")
            listing.append(item)
            continue
        if size is not None and size > MAX_STORED_BYTES:
            item["note"] = f"{size} bytes, over the {MAX_STORED_BYTES} byte limit: hashed, not stored"
            listing.append(item)
            continue
        read_from = Path(path)
        if copy is not None and read_from.is_relative_to(copy[0]):
            read_from = Path(copy[1]) / read_from.relative_to(copy[0])
            name = _safe_name(index, path)
            try:  # the snapshot's read-only copy, linked (no bytes copied); a name already there is not replaced
                os.link(read_from, target / name, follow_symlinks=False)
                item.update(stored_as=f"{STORE_DIR}/{name}")
                listing.append(item)
                continue
            except OSError:  # another file system: copied below
                pass
        try:
            data = read_from.read_bytes()
        except OSError as exc:
            item["note"] = f"could not be read: {exc.strerror or exc}"
            listing.append(item)
            continue
        if len(data) > MAX_STORED_BYTES:
            item["note"] = f"{len(data)} bytes, over the {MAX_STORED_BYTES} byte limit: hashed, not stored"
            listing.append(item)
            continue
        name = _safe_name(index, path)
        try:  # never through a symlink planted there; on disk now: a commit flushes this folder's names only
            write_flushed(target / name, data, replace=True)
        except OSError as exc:
            item["note"] = f"could not be stored: {exc.strerror or exc}"
            listing.append(item)
            continue
        stored = hashlib.sha256(data).hexdigest()
        item.update(stored_as=f"{STORE_DIR}/{name}", sha256=stored)
        if entry.get("sha256") and entry["sha256"] != stored:
            item["note"] = f"changed after it was identified (identified sha256 {entry['sha256']})"
        listing.append(item)
    return listing

"""Inputs the driver names travel with the jobs: the `--root` task file (or a small folder) and the `--runner`.

Paths are resolved on the driver first: a relative `--root t.jsonl` means the driver's file, never a path on
the node. Each input is packed once into a deterministic archive (sorted members, no times or owners, a gzip
header without a date: the same files give the same sha256) and put in Ray's object store. A node checks the
archive against its sha256, unpacks it once into `<tmp>/qitos-shipped/<sha256>/` (content-addressed: every run
shipping the same inputs reuses it) and its jobs read it there. Each process using a copy holds a shared lock on
it; a copy no process holds and unused for KEEP_SECONDS is removed by the next unpack on that node. A `--root` folder larger than SHIP_LIMIT is
not shipped: nodes read it at the same absolute path (and the dataset digest check catches a different copy).
Benchmark data under the data dir is never shipped: each node has its own (`qit data fetch`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHIP_LIMIT = 64 * 1024 * 1024
KEEP_SECONDS = 3600.0  # an unused copy stays this long for the next run shipping the same inputs
_HELD: dict[str, Any] = {}  # sha256 -> the open lock file this process holds (shared) while it uses the copy
SKIP = {"__pycache__", ".git", ".venv", "node_modules", ".pytest_cache"}


@dataclass(frozen=True)
class Bundle:
    """Files packed on the driver: `name` is the path (relative to the unpacked folder) that stands for them."""

    name: str
    data: bytes
    sha256: str

    def unpack(self) -> Path:
        """On a node: the unpacked copy's path (unpacked once per node; concurrent jobs wait for the first).

        Raises ShipmentDamaged when the bytes that arrived are not the archive the driver packed."""
        import fcntl

        if hashlib.sha256(self.data).hexdigest() != self.sha256:
            raise ShipmentDamaged(f"the shipped {self.name or 'runner'} does not match its sha256 {self.sha256[:16]}")
        base = Path(tempfile.gettempdir()) / "qitos-shipped"
        target = base / self.sha256
        done = target / ".complete"
        base.mkdir(parents=True, exist_ok=True)
        if self.sha256 not in _HELD:  # held (shared) for this process's life: no clean-up removes it meanwhile
            use = open(base / f"{self.sha256}.lock", "a")
            fcntl.flock(use, fcntl.LOCK_SH)
            os.utime(use.name)
            _HELD[self.sha256] = use
        if not done.exists():
            with open(base / f"{self.sha256}.unpack", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not done.exists():
                    shutil.rmtree(target, ignore_errors=True)  # a copy cut short by a killed unpack
                    target.mkdir()
                    with tarfile.open(fileobj=io.BytesIO(self.data), mode="r:gz") as tar:
                        tar.extractall(target, filter="data")
                    done.touch()
        remove_unused(base)
        return target / self.name


class ShipmentDamaged(RuntimeError):
    """A shipped archive whose bytes are not the ones the driver packed."""


def remove_unused(base: Path, keep_seconds: float = KEEP_SECONDS) -> list[str]:
    """Remove the unpacked copies no process holds and none used for `keep_seconds`; the sha256s removed."""
    import fcntl
    import time

    removed = []
    for lock_path in base.glob("*.lock"):
        sha = lock_path.stem
        if sha in _HELD:
            continue
        try:
            if time.time() - lock_path.stat().st_mtime < keep_seconds:
                continue
            with open(lock_path, "a") as use:
                fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no process holds it shared: nobody uses it
                shutil.rmtree(base / sha, ignore_errors=True)
                (base / f"{sha}.unpack").unlink(missing_ok=True)
                lock_path.unlink(missing_ok=True)
                removed.append(sha)
        except (BlockingIOError, FileNotFoundError):
            continue
    return removed


def _files_under(folder: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP)
        out += [Path(dirpath) / f for f in sorted(filenames) if not f.endswith(".pyc")]
    return out


def pack(base: Path, members: list[Path], name: str) -> Bundle | None:
    """`members` (paths under `base`) as one bundle, or None when they exceed SHIP_LIMIT together."""
    if sum(p.stat().st_size for p in members if p.is_file()) > SHIP_LIMIT:
        return None
    buffer = io.BytesIO()
    # same files, same bytes, same sha256: no dates (the gzip header's included), owners or modes beyond the files'
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=1, mtime=0) as packed:
        with tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(members):
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(base)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                info.mode &= 0o755
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
    data = buffer.getvalue()
    return Bundle(name=name, data=data, sha256=hashlib.sha256(data).hexdigest())


def pack_root(root: Path, companions: list[Path]) -> Bundle | None:
    """A `--root` file with the files its rows name (relative to its folder), or a `--root` folder."""
    root = root.resolve()
    if root.is_dir():
        return pack(root.parent, _files_under(root), root.name)
    base = root.parent
    members = [root] + [p.resolve() for p in companions if p.resolve().is_relative_to(base) and p.is_file()]
    return pack(base, sorted(set(members)), root.name)


def pack_runner(runner: str) -> Bundle | None:
    """The `--runner`'s top-level module or package (found without importing it), so nodes import the driver's
    code, not whatever copy they have."""
    from qitos.run.sides.host import runner_root

    base, file = runner_root(runner)
    if base is None or file is None:
        return None
    origin = Path(file)
    if origin.name == "__init__.py":
        return pack(Path(base), _files_under(origin.parent), "")
    return pack(Path(base), [origin], "")


@dataclass(frozen=True)
class Shipment:
    """What every job of a batch needs from the driver, put once in Ray's object store."""

    cfg_json: str
    dataset_digest: str
    experiment_json: str
    selected_tasks: int
    run_spec_ref: str | None
    model_id: str | None
    run_spec_extra: dict[str, Any]  # the driver's agent code identity etc., so every node's RunSpec is the driver's
    data_dir: str | None  # an explicit --data-dir (the same path on every node), or None: each node's own
    recipe_name: str  # for the rows of jobs a node could not run
    row_model: str | None
    root: Bundle | None = None
    runner: Bundle | None = None
    root_path: str | None = None  # the driver's resolved --root (used as is when not shipped)


def build_shipment(ctx: Any) -> Shipment:
    """The batch's shipment, from the driver's JobContext (paths resolved here)."""
    from qitos.benchmark.base import default_data_dir

    cfg, load = ctx.cfg, ctx.cfg.load
    root_path = Path(load.root).expanduser().resolve() if load.root else None
    root = pack_root(root_path, ctx.adapter.shipped_files(load)) if root_path and root_path.exists() else None
    data_dir = Path(load.data_dir).expanduser().resolve()
    explicit = data_dir != default_data_dir().expanduser().resolve()
    return Shipment(cfg_json=cfg.model_dump_json(), dataset_digest=ctx.dataset_digest,
                    experiment_json=ctx.experiment.model_dump_json(), selected_tasks=ctx.selected_tasks,
                    run_spec_ref=ctx.run_spec_ref, model_id=ctx.model_id, run_spec_extra=ctx.run_spec_extra(),
                    data_dir=str(data_dir) if explicit else None, recipe_name=ctx.recipe.name,
                    row_model=(ctx.model_id or cfg.model.model_name) if ctx.recipe.needs_model else None, root=root,
                    runner=pack_runner(cfg.runner) if cfg.runner else None,
                    root_path=str(root_path) if root_path else None)

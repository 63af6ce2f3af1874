"""The data directory: pinned benchmark sources, resumable downloads and sha256 verification.

Each redistributable benchmark has a pinned source in `data_sources/<name>.json`: an upstream
archive at a fixed commit and the sha256 of every file we take from it (`files`) and of every file
we convert from it (`converted`: where the upstream format is Python, e.g. Tau-Bench's task modules,
parsed with `ast`, never executed; the conversion is deterministic). `fetch` downloads the archive
(resuming a partial download), installs those files and verifies each checksum; `verify` checks
every one of them again, so a task file cut short or edited is named. GAIA is gated and never
redistributed: its entry explains how to use your copy.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.refs import load_ref

GATED = {
    "gaia": "GAIA is gated and may not be redistributed: accept its terms on the Hugging Face hub, then either put "
            "your copy (2023/<split>/metadata.jsonl + attachments) at {dir} or pass --root, or download it with "
            "`python -c \"from qitos.benchmark.gaia import download_gaia; download_gaia(Path('{dir}'))\"` and HF_TOKEN set.",
}


@dataclass
class Source:
    name: str
    description: str
    archive: str
    commit: str
    license: str
    files: dict[str, str]
    converted: dict[str, str] = field(default_factory=dict)  # path -> sha256 of what the conversion writes
    # 'module:function(upstream_tree, target)' that writes the converted files (the family's own code)
    convert: str | None = None


@dataclass
class VerifyReport:
    name: str
    path: Path
    present: bool
    ok: int = 0
    missing: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.present and not self.missing and not self.mismatched


def sources() -> dict[str, Source]:
    out = {}
    folder = resources.files("qitos.benchmark").joinpath("data_sources")
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".json"):
            raw = json.loads(item.read_text())
            name = item.name[:-5]
            out[name] = Source(name=name, **raw)
    return out


def get_source(name: str) -> Source:
    known = sources()
    if name in GATED:
        raise BenchmarkUsageError(GATED[name].format(dir="<data dir>/" + name))
    if name not in known:
        raise BenchmarkUsageError(f"no pinned data source '{name}'; known: {', '.join(sorted(known) + sorted(GATED))}")
    return known[name]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(source: Source, data_dir: Path) -> VerifyReport:
    root = data_dir / source.name
    report = VerifyReport(source.name, root, root.exists())
    if not report.present:
        return report
    for rel, digest in {**source.files, **source.converted}.items():
        path = root / rel
        if not path.is_file():
            report.missing.append(rel)
        elif sha256_file(path) != digest:
            report.mismatched.append(rel)
        else:
            report.ok += 1
    return report


def download(url: str, dest: Path, progress: Callable[[int, int | None], None] | None = None) -> Path:
    """Stream `url` to `dest`, resuming from `dest.part` when the server supports ranges."""
    import httpx

    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
        with httpx.stream("GET", url, headers=headers, follow_redirects=True, timeout=60) as response:
            if response.status_code == 416:  # already complete
                part.rename(dest)
                return dest
            response.raise_for_status()
            mode = "ab" if response.status_code == 206 else "wb"
            total = response.headers.get("content-length")
            done = offset if mode == "ab" else 0
            with open(part, mode) as fh:
                for chunk in response.iter_bytes(1 << 16):
                    fh.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, int(total) + (offset if mode == "ab" else 0) if total else None)
    except httpx.HTTPError as exc:
        raise BenchmarkUsageError(
            f"could not download {url}: {exc}. Without internet, copy the data into the data directory "
            f"(see `qit data list`) or point QITOS_DATA_DIR at an existing copy; rerunning resumes the download."
        ) from None
    part.rename(dest)
    return dest


def _extract(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    roots = [p for p in into.iterdir() if p.is_dir()]
    if len(roots) != 1:
        raise BenchmarkUsageError(f"{archive}: expected one top-level folder in the archive")
    return roots[0]


def install_from_tree(source: Source, repo_root: Path, target: Path) -> None:
    """Copy (or convert) the pinned files from an extracted upstream tree into `target`."""
    target.mkdir(parents=True, exist_ok=True)
    if source.convert:
        load_ref(source.convert)(repo_root, target)
        # upstream/: the unmodified protocol sources (user simulator, agents, run loop, few-shot examples)
        _copy_files(source, repo_root, target, [rel for rel in source.files if rel.startswith("upstream/")],
                    strip="upstream/")
        return
    # upstream/: unmodified upstream sources QitOS reads as data (OSWorld's PromptAgent), from the archive's root
    _copy_files(source, repo_root, target, [rel for rel in source.files if not rel.startswith("upstream/")])
    _copy_files(source, repo_root, target, [rel for rel in source.files if rel.startswith("upstream/")],
                strip="upstream/")


def _copy_files(source: Source, repo_root: Path, target: Path, files: list[str], strip: str = "") -> None:
    for rel in files:  # our layout keeps upstream's relative paths (below `strip`)
        src = repo_root / rel[len(strip):]
        if not src.is_file():
            raise BenchmarkUsageError(f"{source.archive}: file '{rel}' is missing from the archive")
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def fetch(name: str, data_dir: Path, progress: Callable[[int, int | None], None] | None = None,
          source: Source | None = None) -> VerifyReport:
    """Download, install and verify one benchmark's data; a verified copy is left untouched."""
    source = source or get_source(name)
    existing = verify(source, data_dir)
    if existing.verified:
        return existing
    cache = data_dir / ".downloads"
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / f"{name}-{source.commit[:12]}.tar.gz"
    if not archive.exists():
        download(source.archive, archive, progress)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        repo_root = _extract(archive, Path(tmp))
        staging = Path(tmp) / "staging"
        install_from_tree(source, repo_root, staging)
        target = data_dir / name
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), str(target))
    final = verify(source, data_dir)
    if not final.verified:
        raise BenchmarkUsageError(
            f"{name}: {len(final.mismatched)} file(s) do not match the pinned sha256 and {len(final.missing)} are missing "
            f"(first: {(final.mismatched + final.missing)[:3]}); the upstream archive changed or the download is corrupt. "
            f"Delete {archive} and retry.")
    return final

"""Scoring side: what the official evaluators can score here (the coverage report and each task's resolution), kept on
disk between commands.

Computing it imports upstream's whole `desktop_env.evaluators` (pandas, OpenCV, PyMuPDF, ...: about 3 s), which
`qit bench list` and `qit bench run --dry-run` would otherwise pay on every call. The report depends only on the
task files, the evaluators' files, the Python packages installed and QitOS's own resolving code, so the cache key
is their stat stamps (path, size, mtime): change any of them (edit a task, install a package, upgrade QitOS) and
the report is computed again. A cache that cannot be read or written only costs the recomputation.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel

from qitos.benchmark.osworld.coverage import CoverageReport
from qitos.benchmark.osworld.evaluator import Resolution

_OWN_CODE = ("coverage.py", "evaluator.py", "upstream.py", "tasks.py", "config.py")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qitos" / "osworld-coverage"


class Scorability(BaseModel):
    """The test_all coverage report, and each test_all task's resolution (task id -> ready, or why not)."""

    coverage: CoverageReport
    resolutions: dict[str, Resolution]


def cached_scorability(examples: Path, evaluators: Path, compute: Callable[[], Scorability]) -> Scorability:
    """The scorability of these task files with these evaluators, from the cache when nothing it depends on
    changed."""
    path = cache_dir() / f"{_key(examples, evaluators)}.json"
    try:
        return Scorability.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    report = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".coverage-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(report.model_dump_json())
        os.replace(tmp, path)
    except OSError:
        pass
    return report


def _key(examples: Path, evaluators: Path) -> str:
    h = hashlib.sha256()
    h.update(f"{os.path.realpath(sys.prefix)}\0{sys.version}\0".encode())
    for folder in (examples, evaluators):
        h.update(f"{folder.resolve()}\0".encode())
        for stamp in _stamps(folder):
            h.update(stamp.encode())
    here = Path(__file__).parent
    for name in _OWN_CODE:
        h.update(_stamp(here / name).encode())
    for entry in sys.path:  # a package installed, removed or upgraded changes its site folder's mtime
        if entry.endswith(("site-packages", "dist-packages")) and os.path.isdir(entry):
            h.update(_stamp(Path(entry)).encode())
    return h.hexdigest()[:32]


def _stamps(folder: Path) -> Iterator[str]:
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            yield _stamp(Path(parent) / name)


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}\0-\0"
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0"

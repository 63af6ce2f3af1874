"""Container formats: zip/tar archives, EPUB books and HTML pages, compared by content."""

from __future__ import annotations

import re
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ._util import normalise_space, read_text, score


def _extract(archive: Any, target: Path) -> bool:
    """Unpack a zip or tar(.gz/.bz2/.xz) archive safely (no paths outside target); False when unreadable."""
    path = _file(archive)
    if path is None:
        return False
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                for member in zf.namelist():
                    if not _inside(target, member):
                        return False
                zf.extractall(target)
            return True
        if tarfile.is_tarfile(path):
            with tarfile.open(path) as tf:
                members = tf.getmembers()
                if any(not _inside(target, m.name) or m.issym() or m.islnk() for m in members):
                    return False
                tf.extractall(target, members=[m for m in members if m.isfile() or m.isdir()])
            return True
    except (zipfile.BadZipFile, tarfile.TarError, OSError):
        return False
    return False


def _file(path: Any) -> Path | None:
    return Path(path) if path is not None and Path(path).is_file() else None


def _inside(target: Path, member: str) -> bool:
    return (target / member).resolve().is_relative_to(target.resolve())


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def _comparator(file_type: str) -> Callable[[Any, Any], float]:
    from . import METRICS

    by_type = {
        "text": "compare_text_file",
        "pdf": "compare_pdfs",
        "docx": "compare_docx_files",
        "pptx": "compare_pptx_files",
        "xlsx": "compare_table",
        "csv": "compare_csv",
        "image": "compare_images",
    }
    if file_type in by_type:
        return METRICS[by_type[file_type]]
    return lambda a, b: score(Path(a).read_bytes() == Path(b).read_bytes())


def compare_archive(result: Any, expected: Any = None, file_type: str = "text", file_path: str = "", **_: Any) -> float:
    """Both archives (optionally their `file_path` folder) must hold the same file names; the score is the
    mean of the per-file scores of the metric for `file_type` (text, pdf, docx, pptx, xlsx, csv, image;
    anything else compares bytes)."""
    with tempfile.TemporaryDirectory(prefix="qitos-osworld-archive-") as tmp:
        a_dir, b_dir = Path(tmp, "result"), Path(tmp, "expected")
        if not (_extract(result, a_dir) and _extract(expected, b_dir)):
            return 0.0
        a_files, b_files = _files(a_dir / file_path), _files(b_dir / file_path)
        if not b_files or set(a_files) != set(b_files):
            return 0.0
        compare = _comparator(file_type)
        scores = [compare(a_files[name], b_files[name]) for name in sorted(b_files)]
        return sum(scores) / len(scores)


def compare_zip_files(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both zip files hold the same member names with byte-identical contents."""
    a, b = _file(result), _file(expected)
    if a is None or b is None:
        return 0.0
    try:
        with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
            names = sorted(n for n in za.namelist() if not n.endswith("/"))
            if names != sorted(n for n in zb.namelist() if not n.endswith("/")):
                return 0.0
            return score(all(za.read(n) == zb.read(n) for n in names))
    except (zipfile.BadZipFile, OSError, KeyError):
        return 0.0


class _TextExtractor(HTMLParser):
    """Visible text of an HTML/XHTML document (scripts and styles skipped)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_text(markup: str) -> str:
    parser = _TextExtractor()
    parser.feed(markup)
    return normalise_space(" ".join(parser.parts))


def compare_htmls(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both HTML files show the same visible text (whitespace collapsed)."""
    a, b = read_text(result), read_text(expected)
    return score(a is not None and b is not None and html_text(a) == html_text(b))


_CONTENT = re.compile(r"\.(x?html?)$", re.I)


def _epub_texts(path: Any) -> list[str] | None:
    if _file(path) is None:
        return None
    try:
        with zipfile.ZipFile(path) as zf:
            names = sorted(n for n in zf.namelist() if _CONTENT.search(n))
            return [t for t in (html_text(zf.read(n).decode("utf-8", "replace")) for n in names) if t]
    except (zipfile.BadZipFile, OSError):
        return None


def compare_epub(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both EPUBs hold the same visible text across their (X)HTML documents, ignoring file names."""
    a, b = _epub_texts(result), _epub_texts(expected)
    return score(bool(a) and a is not None and b is not None and " ".join(a) == " ".join(b))


METRICS = {
    "compare_archive": compare_archive,
    "compare_zip_files": compare_zip_files,
    "compare_htmls": compare_htmls,
    "compare_epub": compare_epub,
}

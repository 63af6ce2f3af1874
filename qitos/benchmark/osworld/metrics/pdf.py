"""PDF metrics with pypdf: text similarity, page counts, embedded images."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._util import as_list, match_rule, score


def _reader(path: Any) -> Any:
    if path is None or not Path(path).is_file():
        return None
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        return PdfReader(str(path))
    except (PdfReadError, OSError, ValueError):
        return None


def pdf_text(path: Any) -> str | None:
    """All pages' extracted text, or None when the file is missing or not a PDF."""
    reader = _reader(path)
    if reader is None:
        return None
    return "\n".join(page.extract_text() or "" for page in reader.pages)


def compare_pdfs(result: Any, expected: Any = None, **_: Any) -> float:
    """Graded text similarity: difflib ratio over the word sequences of the two PDFs (1.0 when the texts
    match word for word). Lists of PDFs are compared pairwise and averaged."""
    got, want = as_list(result), as_list(expected)
    if not got or len(got) != len(want):
        return 0.0
    scores = []
    for a, b in zip(got, want):
        text_a, text_b = pdf_text(a), pdf_text(b)
        if text_a is None or text_b is None:
            scores.append(0.0)
            continue
        words_a, words_b = text_a.split(), text_b.split()
        if words_a == words_b:
            scores.append(1.0)
        else:
            scores.append(difflib.SequenceMatcher(None, words_a, words_b, autojunk=False).ratio())
    return sum(scores) / len(scores)


def check_pdf_pages(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the page count satisfies `rules.relation` (eq, lt, le, gt, ge) against `rules.ref_value`."""
    reader = _reader(result)
    if reader is None or not isinstance(expected, Mapping):
        return 0.0
    return score(match_rule(len(reader.pages), {"method": expected.get("relation", "eq"), "ref": expected.get("ref_value")}))


def _images(path: Any) -> list[bytes] | None:
    reader = _reader(path)
    if reader is None:
        return None
    return [image.data for page in reader.pages for image in page.images]


def compare_pdf_images(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both PDFs embed the same number of images with identical pixels, in page order."""
    from .images import same_pixels

    a, b = _images(result), _images(expected)
    if a is None or b is None or len(a) != len(b) or not a:
        return 0.0
    return score(all(x == y or same_pixels(x, y) for x, y in zip(a, b)))


METRICS = {
    "compare_pdfs": compare_pdfs,
    "check_pdf_pages": check_pdf_pages,
    "compare_pdf_images": compare_pdf_images,
}

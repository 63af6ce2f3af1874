"""Word-processor metrics on .docx files (python-docx) plus one .odt check read from the package XML.

Unreadable or missing documents score 0. Where upstream semantics are not known exactly, the docstring
states the rule used here.
"""

from __future__ import annotations

import difflib
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

from ._util import as_list, normalise_space, rules_value, score

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _open(path: Any) -> Any:
    """python-docx Document, or None when the file is missing or not a .docx."""
    if path is None or not Path(path).is_file():
        return None
    import docx

    try:
        return docx.Document(str(path))
    except Exception:  # noqa: BLE001 - a corrupt or non-docx file is a failed result
        return None


def _paragraphs(doc: Any) -> list[str]:
    return [p.text for p in doc.paragraphs]


def _pair(result: Any, expected: Any) -> tuple[Any, Any] | None:
    a, b = _open(result), _open(expected)
    return None if a is None or b is None else (a, b)


def compare_docx_files(
    result: Any,
    expected: Any = None,
    ignore_blanks: bool = True,
    ignore_case: bool = False,
    ignore_order: bool = False,
    content_only: bool = False,
    **_: Any,
) -> float:
    """Text comparison of two documents.

    `ignore_blanks` (default): whole texts compared with whitespace collapsed; otherwise paragraph lists must
    match one to one. `ignore_order` sorts non-empty paragraphs first. `content_only` returns the graded
    difflib ratio of the whitespace-collapsed texts instead of 0/1.
    """
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    got, want = _paragraphs(pair[0]), _paragraphs(pair[1])
    if ignore_case:
        got, want = [p.lower() for p in got], [p.lower() for p in want]
    if ignore_order:
        got = sorted(p.strip() for p in got if p.strip())
        want = sorted(p.strip() for p in want if p.strip())
    if content_only:
        return difflib.SequenceMatcher(None, normalise_space(" ".join(got)), normalise_space(" ".join(want))).ratio()
    if ignore_blanks:
        return score(normalise_space(" ".join(got)) == normalise_space(" ".join(want)))
    return score(got == want)


def compare_docx_files_and_ignore_new_lines(result: Any, expected: Any = None, ignore_blanks: bool = True, **_: Any) -> float:
    """Like compare_docx_files but empty paragraphs (blank lines) are dropped before comparing."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    got = [p for p in _paragraphs(pair[0]) if p.strip()]
    want = [p for p in _paragraphs(pair[1]) if p.strip()]
    if ignore_blanks:
        return score(normalise_space(" ".join(got)) == normalise_space(" ".join(want)))
    return score(got == want)


def _tables(doc: Any) -> list[list[list[str]]]:
    return [[[cell.text.strip() for cell in row.cells] for row in table.rows] for table in doc.tables]


def compare_docx_tables(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both documents have the same tables with the same cell texts."""
    pair = _pair(result, expected)
    return score(pair is not None and _tables(pair[0]) == _tables(pair[1]))


def compare_docx_lines(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both documents hold the same non-empty lines, in any order (multiset of stripped paragraphs)."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    lines = [sorted(p.strip() for p in _paragraphs(d) if p.strip()) for d in pair]
    return score(lines[0] == lines[1])


def compare_line_spacing(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff paragraph texts and each paragraph's line spacing match the gold document."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    a, b = pair[0].paragraphs, pair[1].paragraphs
    if len(a) != len(b):
        return 0.0
    return score(all(
        p.text == q.text and p.paragraph_format.line_spacing == q.paragraph_format.line_spacing for p, q in zip(a, b)
    ))


def check_tabstops(result: Any, expected: Any = None, word_number_split_by_tabstop: int = 3, index: int = 0, **_: Any) -> float:
    """Every non-empty paragraph: same tab stops (position, alignment) as the gold paragraph, and the
    tab-separated part at `index` has exactly `word_number_split_by_tabstop` words."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    a, b = pair[0].paragraphs, pair[1].paragraphs
    if len(a) != len(b):
        return 0.0
    for p, q in zip(a, b):
        if not p.text.strip():
            continue
        stops = [[(t.position, t.alignment) for t in para.paragraph_format.tab_stops] for para in (p, q)]
        parts = p.text.split("\t")
        if stops[0] != stops[1] or len(parts) <= index or len(parts[index].split()) != word_number_split_by_tabstop:
            return 0.0
    return 1.0


def compare_subscript_contains(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every subscript run text of the gold document is also subscript in the result (and the result
    has at least one subscript run)."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    subs = [{r.text for p in d.paragraphs for r in p.runs if r.font.subscript and r.text} for d in pair]
    return score(bool(subs[0]) and subs[1] <= subs[0])


def has_page_numbers_in_footers(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every section's footer holds a PAGE field."""
    doc = _open(result)
    if doc is None or not doc.sections:
        return 0.0
    for section in doc.sections:
        xml = section.footer._element.xml
        if not re.search(r'w:instr="\s*PAGE\b|<w:instrText[^>]*>\s*PAGE\b', xml):
            return 0.0
    return 1.0


def _run_font_name(run: Any, paragraph: Any) -> str | None:
    return run.font.name or (paragraph.style.font.name if paragraph.style is not None else None)


def compare_font_names(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every non-empty run uses `rules.font_name` (run font, else its paragraph style's font)."""
    doc = _open(result)
    if doc is None:
        return 0.0
    want = rules_value(expected, "font_name")
    runs = [(r, p) for p in doc.paragraphs for r in p.runs if r.text.strip()]
    return score(bool(runs) and all(_run_font_name(r, p) == want for r, p in runs))


def is_first_line_centered(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the first non-empty paragraph is centre-aligned."""
    doc = _open(result)
    if doc is None:
        return 0.0
    from docx.enum.text import WD_ALIGN_PARAGRAPH

    first = next((p for p in doc.paragraphs if p.text.strip()), None)
    return score(first is not None and first.alignment == WD_ALIGN_PARAGRAPH.CENTER)


def _has_image(paragraph: Any) -> bool:
    return "graphicData" in paragraph._p.xml


def compare_contains_image(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff paragraphs line up and each holds an image exactly where the gold paragraph does."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    a, b = pair[0].paragraphs, pair[1].paragraphs
    return score(len(a) == len(b) and all(_has_image(p) == _has_image(q) for p, q in zip(a, b)))


def _image_blobs(doc: Any) -> list[bytes]:
    blobs = []
    for blip in doc.element.body.iter("{http://schemas.openxmlformats.org/drawingml/2006/main}blip"):
        rel_id = blip.get("{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed")
        if rel_id in doc.part.related_parts:
            blobs.append(doc.part.related_parts[rel_id].blob)
    return blobs


def compare_docx_images(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff both documents embed the same images in the same order (same pixels, any encoding)."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    a, b = _image_blobs(pair[0]), _image_blobs(pair[1])
    if len(a) != len(b) or not a:
        return 0.0
    from .images import same_pixels

    return score(all(x == y or same_pixels(x, y) for x, y in zip(a, b)))


def evaluate_strike_through_last_paragraph(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the texts match the gold document and every run of the last non-empty paragraph is struck."""
    pair = _pair(result, expected)
    if pair is None or _paragraphs(pair[0]) != _paragraphs(pair[1]):
        return 0.0
    last = next((p for p in reversed(pair[0].paragraphs) if p.text.strip()), None)
    runs = [r for r in last.runs if r.text.strip()] if last is not None else []
    return score(bool(runs) and all(r.font.strike for r in runs))


def _hue(run: Any) -> str | None:
    color = run.font.color
    rgb = color.rgb if color is not None and color.type is not None else None
    if rgb is None:
        return None
    r, g, b = rgb[0], rgb[1], rgb[2]
    return "red" if r > g and r > b else "blue" if b > r and b > g else None


def evaluate_colored_words_in_tables(result: Any, expected: Any = None, **_: Any) -> float:
    """In every table, words starting with a vowel are red and the others blue (judged by the dominant RGB
    channel, so LibreOffice's named reds/blues pass); table texts must match the gold document."""
    pair = _pair(result, expected)
    if pair is None or _tables(pair[0]) != _tables(pair[1]) or not pair[0].tables:
        return 0.0
    for table in pair[0].tables:
        for row in table.rows:
            for cell in row.cells:
                for paragraph in cell.paragraphs:
                    for run in paragraph.runs:
                        word = run.text.strip()
                        if word and _hue(run) != ("red" if word[0].lower() in "aeiou" else "blue"):
                            return 0.0
    return 1.0


def check_italic_font_size_14(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the texts match the gold document and every italic run is 14 pt."""
    pair = _pair(result, expected)
    if pair is None or _paragraphs(pair[0]) != _paragraphs(pair[1]):
        return 0.0
    italic = [r for p in pair[0].paragraphs for r in p.runs if r.italic and r.text.strip()]
    return score(all(r.font.size is not None and r.font.size.pt == 14 for r in italic))


def contains_page_break(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the document contains a manual page break."""
    doc = _open(result)
    if doc is None:
        return 0.0
    return score(any(br.get(f"{_W}type") == "page" for br in doc.element.body.iter(f"{_W}br")))


def _references(doc: Any) -> list[str]:
    paragraphs = [p.text.strip() for p in doc.paragraphs if p.text.strip()]
    heads = [i for i, p in enumerate(paragraphs) if p.lower().rstrip(":") in ("references", "reference list", "bibliography")]
    return paragraphs[heads[-1] + 1 :] if heads else paragraphs


def compare_references(result: Any, expected: Any = None, content_only: bool = False, reference_base_result: float = 0.5, **_: Any) -> float:
    """Graded: difflib similarity s of the reference lists (after the last "References" heading), rescaled
    as (s - base) / (1 - base) and clipped at 0, so only edits beyond the starting document earn credit."""
    pair = _pair(result, expected)
    if pair is None:
        return 0.0
    a, b = (" ".join(_references(d)) for d in pair)
    if content_only:
        a, b = normalise_space(a), normalise_space(b)
    similarity = difflib.SequenceMatcher(None, a, b).ratio()
    base = float(reference_base_result)
    if similarity >= 1.0:
        return 1.0
    return max(0.0, (similarity - base) / (1.0 - base)) if base < 1.0 else 0.0


def fuzzy_place_math(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the document has at least one non-empty paragraph and each one fuzzily (ratio >= 0.9) equals one
    of the accepted places in `rules.expected`."""
    doc = _open(result)
    if doc is None:
        return 0.0
    places = [str(p) for p in as_list(rules_value(expected))]
    lines = [p.text.strip() for p in doc.paragraphs if p.text.strip()]
    return score(bool(lines) and all(
        any(difflib.SequenceMatcher(None, line, place).ratio() >= 0.9 for place in places) for line in lines
    ))


_ODF_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_ODF_FO = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"


def check_highlighted_words(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff no text in the .odt result carries a background (highlight) colour."""
    if result is None or not Path(result).is_file():
        return 0.0
    try:
        with zipfile.ZipFile(result) as package:
            root = ET.fromstring(package.read("content.xml"))
    except (zipfile.BadZipFile, KeyError, ET.ParseError):
        return 0.0
    highlighted = set()
    for style in root.iter(f"{_ODF_STYLE}style"):
        props = style.find(f"{_ODF_STYLE}text-properties")
        background = props.get(f"{_ODF_FO}background-color") if props is not None else None
        if background and background != "transparent":
            highlighted.add(style.get(f"{_ODF_STYLE}name"))
    for element in root.iter():
        if element.tag in (f"{_ODF_TEXT}span", f"{_ODF_TEXT}p", f"{_ODF_TEXT}h"):
            if element.get(f"{_ODF_TEXT}style-name") in highlighted and "".join(element.itertext()).strip():
                return 0.0
    return 1.0


METRICS = {
    "compare_docx_files": compare_docx_files,
    "compare_docx_files_and_ignore_new_lines": compare_docx_files_and_ignore_new_lines,
    "compare_docx_tables": compare_docx_tables,
    "compare_docx_lines": compare_docx_lines,
    "compare_line_spacing": compare_line_spacing,
    "check_tabstops": check_tabstops,
    "compare_subscript_contains": compare_subscript_contains,
    "has_page_numbers_in_footers": has_page_numbers_in_footers,
    "compare_font_names": compare_font_names,
    "is_first_line_centered": is_first_line_centered,
    "compare_contains_image": compare_contains_image,
    "compare_docx_images": compare_docx_images,
    "evaluate_strike_through_last_paragraph": evaluate_strike_through_last_paragraph,
    "evaluate_colored_words_in_tables": evaluate_colored_words_in_tables,
    "check_italic_font_size_14": check_italic_font_size_14,
    "contains_page_break": contains_page_break,
    "compare_references": compare_references,
    "fuzzy_place_math": fuzzy_place_math,
    "check_highlighted_words": check_highlighted_words,
}

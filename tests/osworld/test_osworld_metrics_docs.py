"""Word-processor metrics on .docx (python-docx) and .odt files generated in the test."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

docx = pytest.importorskip("docx")
from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_BREAK, WD_TAB_ALIGNMENT  # noqa: E402
from docx.oxml import OxmlElement  # noqa: E402
from docx.oxml.ns import qn  # noqa: E402
from docx.shared import Pt, RGBColor  # noqa: E402
from PIL import Image  # noqa: E402

from qitos.benchmark.osworld.metrics import METRICS  # noqa: E402


def make(path: Path, build: Callable[[object], None]) -> str:
    document = docx.Document()
    build(document)
    document.save(path)
    return str(path)


def paragraphs(*texts: str) -> Callable[[object], None]:
    def build(d) -> None:
        for text in texts:
            d.add_paragraph(text)

    return build


def test_compare_docx_files_options(tmp_path: Path) -> None:
    a = make(tmp_path / "a.docx", paragraphs("Hello  world.", "", "Second line."))
    b = make(tmp_path / "b.docx", paragraphs("Hello world.", "Second line."))
    c = make(tmp_path / "c.docx", paragraphs("second line.", "HELLO WORLD."))
    compare = METRICS["compare_docx_files"]
    assert compare(a, b) == 1.0
    assert compare(a, b, ignore_blanks=False) == 0.0
    assert compare(c, b) == 0.0
    assert compare(c, b, ignore_case=True, ignore_order=True) == 1.0
    assert 0.0 < compare(c, b, content_only=True) < 1.0
    assert METRICS["compare_docx_files_and_ignore_new_lines"](a, b, ignore_blanks=False) == 0.0
    assert METRICS["compare_docx_files_and_ignore_new_lines"](make(tmp_path / "d.docx", paragraphs("Hello world.", "", "Second line.")), b, ignore_blanks=False) == 1.0


def table(rows: list[list[str]]) -> Callable[[object], None]:
    def build(d) -> None:
        t = d.add_table(rows=len(rows), cols=len(rows[0]))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                t.cell(r, c).text = value

    return build


def test_compare_docx_tables_and_lines(tmp_path: Path) -> None:
    a = make(tmp_path / "a.docx", table([["a", "b"], ["c", "d"]]))
    assert METRICS["compare_docx_tables"](a, make(tmp_path / "b.docx", table([["a", "b"], ["c", "d"]]))) == 1.0
    assert METRICS["compare_docx_tables"](a, make(tmp_path / "c.docx", table([["a", "b"], ["c", "x"]]))) == 0.0
    lines = make(tmp_path / "l.docx", paragraphs("06:00 T1", "06:05 T2"))
    assert METRICS["compare_docx_lines"](lines, make(tmp_path / "l2.docx", paragraphs("06:05 T2", "", "06:00 T1"))) == 1.0
    assert METRICS["compare_docx_lines"](lines, make(tmp_path / "l3.docx", paragraphs("06:00 T1"))) == 0.0


def spaced(spacing: float) -> Callable[[object], None]:
    def build(d) -> None:
        d.add_paragraph("One").paragraph_format.line_spacing = spacing

    return build


def test_compare_line_spacing(tmp_path: Path) -> None:
    gold = make(tmp_path / "g.docx", spaced(2.0))
    assert METRICS["compare_line_spacing"](make(tmp_path / "a.docx", spaced(2.0)), gold) == 1.0
    assert METRICS["compare_line_spacing"](make(tmp_path / "b.docx", spaced(1.0)), gold) == 0.0


def tabbed(text: str) -> Callable[[object], None]:
    def build(d) -> None:
        p = d.add_paragraph(text)
        p.paragraph_format.tab_stops.add_tab_stop(Pt(400), WD_TAB_ALIGNMENT.RIGHT)

    return build


def test_check_tabstops(tmp_path: Path) -> None:
    gold = make(tmp_path / "g.docx", tabbed("one two three\tfour five"))
    check = METRICS["check_tabstops"]
    assert check(make(tmp_path / "a.docx", tabbed("one two three\tfour five")), gold, word_number_split_by_tabstop=3, index=0) == 1.0
    assert check(make(tmp_path / "b.docx", tabbed("one two\tthree four five")), gold, word_number_split_by_tabstop=3, index=0) == 0.0


def with_run(**font) -> Callable[[object], None]:
    def build(d) -> None:
        p = d.add_paragraph("H")
        run = p.add_run(font.pop("text", "2"))
        for key, value in font.items():
            setattr(run.font, key, value)
        p.add_run("O")

    return build


def test_subscript_strike_italic(tmp_path: Path) -> None:
    sub = make(tmp_path / "s.docx", with_run(subscript=True))
    plain = make(tmp_path / "p.docx", with_run())
    assert METRICS["compare_subscript_contains"](sub, sub) == 1.0
    assert METRICS["compare_subscript_contains"](plain, sub) == 0.0
    struck = make(tmp_path / "k.docx", lambda d: (d.add_paragraph("Intro"), d.add_paragraph().add_run("Redundant").font.__setattr__("strike", True)))
    gold = make(tmp_path / "kg.docx", paragraphs("Intro", "Redundant"))
    assert METRICS["evaluate_strike_through_last_paragraph"](struck, gold) == 1.0
    assert METRICS["evaluate_strike_through_last_paragraph"](gold, gold) == 0.0
    italic14 = make(tmp_path / "i.docx", with_run(text="word", italic=True, size=Pt(14)))
    italic12 = make(tmp_path / "j.docx", with_run(text="word", italic=True, size=Pt(12)))
    assert METRICS["check_italic_font_size_14"](italic14, italic12) == 1.0
    assert METRICS["check_italic_font_size_14"](italic12, italic14) == 0.0


def footer_page_field(d) -> None:
    paragraph = d.sections[0].footer.paragraphs[0]
    field = OxmlElement("w:fldSimple")
    field.set(qn("w:instr"), "PAGE")
    paragraph._p.append(field)


def test_footer_fonts_alignment_breaks(tmp_path: Path) -> None:
    assert METRICS["has_page_numbers_in_footers"](make(tmp_path / "f.docx", footer_page_field)) == 1.0
    assert METRICS["has_page_numbers_in_footers"](make(tmp_path / "n.docx", paragraphs("x"))) == 0.0
    tnr = make(tmp_path / "t.docx", with_run(text="2", name="Times New Roman"))
    assert METRICS["compare_font_names"](make(tmp_path / "all.docx", lambda d: d.add_paragraph().add_run("x").font.__setattr__("name", "Times New Roman")),
                                         {"font_name": "Times New Roman"}) == 1.0
    assert METRICS["compare_font_names"](tnr, {"font_name": "Times New Roman"}) == 0.0
    centred = make(tmp_path / "c.docx", lambda d: setattr(d.add_paragraph("Title"), "alignment", WD_ALIGN_PARAGRAPH.CENTER))
    assert METRICS["is_first_line_centered"](centred) == 1.0
    assert METRICS["is_first_line_centered"](make(tmp_path / "l.docx", paragraphs("Title"))) == 0.0
    broken = make(tmp_path / "b.docx", lambda d: d.add_paragraph("a").add_run().add_break(WD_BREAK.PAGE))
    assert METRICS["contains_page_break"](broken) == 1.0
    assert METRICS["contains_page_break"](make(tmp_path / "nb.docx", paragraphs("a"))) == 0.0


def png(color: tuple[int, int, int]) -> io.BytesIO:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buffer, "PNG")
    buffer.seek(0)
    return buffer


def with_image(color: tuple[int, int, int] | None) -> Callable[[object], None]:
    def build(d) -> None:
        d.add_paragraph("Schedule")
        p = d.add_paragraph()
        if color is not None:
            p.add_run().add_picture(png(color))

    return build


def test_image_metrics(tmp_path: Path) -> None:
    red, red2 = make(tmp_path / "r.docx", with_image((255, 0, 0))), make(tmp_path / "r2.docx", with_image((255, 0, 0)))
    blue, none = make(tmp_path / "b.docx", with_image((0, 0, 255))), make(tmp_path / "n.docx", with_image(None))
    assert METRICS["compare_contains_image"](red, blue) == 1.0
    assert METRICS["compare_contains_image"](none, blue) == 0.0
    assert METRICS["compare_docx_images"](red, red2) == 1.0
    assert METRICS["compare_docx_images"](red, blue) == 0.0


def coloured(colours: dict[str, RGBColor]) -> Callable[[object], None]:
    def build(d) -> None:
        t = d.add_table(rows=1, cols=len(colours))
        for i, (word, colour) in enumerate(colours.items()):
            run = t.cell(0, i).paragraphs[0].add_run(word)
            run.font.color.rgb = colour

    return build


def test_evaluate_colored_words_in_tables(tmp_path: Path) -> None:
    red, blue = RGBColor(0xC9, 0x21, 0x1E), RGBColor(0x2A, 0x60, 0x99)
    good = make(tmp_path / "g.docx", coloured({"apple": red, "bat": blue}))
    bad = make(tmp_path / "b.docx", coloured({"apple": blue, "bat": blue}))
    assert METRICS["evaluate_colored_words_in_tables"](good, bad) == 1.0
    assert METRICS["evaluate_colored_words_in_tables"](bad, good) == 0.0


def test_compare_references_and_places(tmp_path: Path) -> None:
    gold = make(tmp_path / "g.docx", paragraphs("Body", "References", "Smith, J. (2020). A study. Journal, 1(2), 3-4."))
    same = make(tmp_path / "s.docx", paragraphs("Body text", "References", "Smith, J. (2020). A study. Journal, 1(2), 3-4."))
    off = make(tmp_path / "o.docx", paragraphs("Body", "References", "Completely different entry"))
    assert METRICS["compare_references"](same, gold, content_only=True, reference_base_result=0.92) == 1.0
    assert METRICS["compare_references"](off, gold, content_only=True, reference_base_result=0.92) == 0.0
    places = {"expected": ["深圳市福田区正义街1号", "深圳市福田区香梅路2002-4号"]}
    assert METRICS["fuzzy_place_math"](make(tmp_path / "p.docx", paragraphs("深圳市福田区正义街1号")), places) == 1.0
    assert METRICS["fuzzy_place_math"](make(tmp_path / "q.docx", paragraphs("北京市海淀区")), places) == 0.0


def odt(path: Path, highlighted: bool) -> str:
    background = 'fo:background-color="#ffff00"' if highlighted else 'fo:background-color="transparent"'
    content = (
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0">'
        f'<office:automatic-styles><style:style style:name="T1" style:family="text"><style:text-properties {background}/>'
        '</style:style></office:automatic-styles><office:body><office:text>'
        '<text:p>Call <text:span text:style-name="T1">recruit</text:span> now</text:p></office:text></office:body>'
        "</office:document-content>"
    )
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("content.xml", content)
    return str(path)


def test_check_highlighted_words(tmp_path: Path) -> None:
    assert METRICS["check_highlighted_words"](odt(tmp_path / "clean.odt", False), None) == 1.0
    assert METRICS["check_highlighted_words"](odt(tmp_path / "marked.odt", True), None) == 0.0

"""Presentation metrics on decks generated with python-pptx."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

pptx = pytest.importorskip("pptx")
from lxml import etree  # noqa: E402
from PIL import Image  # noqa: E402
from pptx.dml.color import RGBColor  # noqa: E402
from pptx.util import Emu, Pt  # noqa: E402

from qitos.benchmark.osworld.metrics import METRICS  # noqa: E402

compare = METRICS["compare_pptx_files"]


def deck(path: Path, build: Callable[[object], None], portrait: bool = False) -> str:
    prs = pptx.Presentation()
    if portrait:
        prs.slide_width, prs.slide_height = prs.slide_height, prs.slide_width
    build(prs)
    prs.save(path)
    return str(path)


def titled(title: str, body: str = "Body", *, bold: bool = False, size: int | None = None, color: RGBColor | None = None,
           note: str = "", background: RGBColor | None = None, top: int | None = None) -> Callable[[object], None]:
    def build(prs) -> None:
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = title
        run = slide.shapes.title.text_frame.paragraphs[0].runs[0]
        run.font.bold = bold or None
        if size:
            run.font.size = Pt(size)
        if color is not None:
            run.font.color.rgb = color
        if top is not None:
            slide.shapes.title.top = Emu(top)
        slide.placeholders[1].text = body
        if note:
            slide.notes_slide.notes_text_frame.text = note
        if background is not None:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = background

    return build


def test_compare_pptx_text_fonts_notes_background(tmp_path: Path) -> None:
    gold = deck(tmp_path / "g.pptx", titled("Plan", bold=True, size=44, color=RGBColor(0, 0, 0), note="Plan", background=RGBColor(0x80, 0, 0x80)))
    same = deck(tmp_path / "s.pptx", titled("Plan", bold=True, size=44, color=RGBColor(0, 0, 0), note="Plan", background=RGBColor(0x80, 0, 0x80)))
    assert compare(same, gold) == 1.0
    variants = {
        "text": titled("Plans", bold=True, size=44, color=RGBColor(0, 0, 0), note="Plan", background=RGBColor(0x80, 0, 0x80)),
        "bold": titled("Plan", size=44, color=RGBColor(0, 0, 0), note="Plan", background=RGBColor(0x80, 0, 0x80)),
        "size": titled("Plan", bold=True, size=40, color=RGBColor(0, 0, 0), note="Plan", background=RGBColor(0x80, 0, 0x80)),
        "color": titled("Plan", bold=True, size=44, color=RGBColor(255, 0, 0), note="Plan", background=RGBColor(0x80, 0, 0x80)),
        "note": titled("Plan", bold=True, size=44, color=RGBColor(0, 0, 0), background=RGBColor(0x80, 0, 0x80)),
        "background": titled("Plan", bold=True, size=44, color=RGBColor(0, 0, 0), note="Plan"),
    }
    for name, build in variants.items():
        assert compare(deck(tmp_path / f"{name}.pptx", build), gold) == 0.0, name
    assert compare(deck(tmp_path / "nb.pptx", variants["bold"]), gold, examine_font_bold=False) == 1.0
    with pytest.raises(ValueError, match="unknown option"):
        compare(same, gold, examine_everything=True)


def test_compare_pptx_slide_count_and_geometry(tmp_path: Path) -> None:
    gold = deck(tmp_path / "g.pptx", titled("Plan"))
    two = deck(tmp_path / "two.pptx", lambda prs: (titled("Plan")(prs), titled("Plan")(prs)))
    assert compare(two, gold) == 0.0
    bottom_gold = deck(tmp_path / "bg.pptx", titled("Plan", top=5_500_000))
    moved = deck(tmp_path / "m.pptx", titled("Plan", top=5_000_000))
    assert compare(moved, bottom_gold) == 0.0
    options = {"examine_shape": False, "examine_title_bottom_position": True}
    assert compare(moved, bottom_gold, **options) == 1.0
    assert compare(gold, bottom_gold, **options) == 0.0


def pictured(left: int, width: int, height: int) -> Callable[[object], None]:
    def build(prs) -> None:
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        buffer = io.BytesIO()
        Image.new("RGB", (40, 20), (0, 128, 0)).save(buffer, "PNG")
        buffer.seek(0)
        slide.shapes.add_picture(buffer, Emu(left), Emu(0), Emu(width), Emu(height))

    return build


def test_picture_position_and_size_options(tmp_path: Path) -> None:
    right = deck(tmp_path / "r.pptx", pictured(6_000_000, 2_000_000, 1_000_000))
    right2 = deck(tmp_path / "r2.pptx", pictured(7_000_000, 1_000_000, 500_000))
    left = deck(tmp_path / "l.pptx", pictured(100_000, 2_000_000, 1_000_000))
    assert compare(right2, right, examine_shape=False, examine_right_position=True) == 1.0
    assert compare(left, right, examine_shape=False, examine_right_position=True) == 0.0
    assert compare(left, right, examine_shape=False, examine_image_size=True) == 1.0
    assert compare(right2, right, examine_shape=False, examine_modify_height=True) == 0.0


def test_orientation_background_distance_and_stretch(tmp_path: Path) -> None:
    assert METRICS["check_slide_orientation_Portrait"](deck(tmp_path / "p.pptx", titled("x"), portrait=True)) == 1.0
    assert METRICS["check_slide_orientation_Portrait"](deck(tmp_path / "l.pptx", titled("x"))) == 0.0
    blue = deck(tmp_path / "b.pptx", titled("x", background=RGBColor(0, 0, 255)))
    assert METRICS["evaluate_presentation_fill_to_rgb_distance"](blue, {"rgb": [0, 0, 255]}) == 1.0
    assert METRICS["evaluate_presentation_fill_to_rgb_distance"](deck(tmp_path / "w.pptx", titled("x")), {"rgb": [0, 0, 255]}) == 0.0
    prs_w, prs_h = 9_144_000, 6_858_000
    original = deck(tmp_path / "o.pptx", pictured(100_000, 2_000_000, 1_000_000))
    stretched = deck(tmp_path / "s.pptx", pictured(0, prs_w, prs_w // 2))
    assert METRICS["check_image_stretch_and_center"](original, original) == 0.0
    # Stretched to full width and centred vertically.
    def centred(prs) -> None:
        pictured(0, prs_w, prs_w // 2)(prs)
        prs.slides[0].shapes[0].top = Emu((prs_h - prs_w // 2) // 2)

    assert METRICS["check_image_stretch_and_center"](deck(tmp_path / "c.pptx", centred), original) == 1.0
    assert METRICS["check_image_stretch_and_center"](stretched, original) == 0.0


def with_transition(kind: str) -> Callable[[object], None]:
    def build(prs) -> None:
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        ns = "http://schemas.openxmlformats.org/presentationml/2006/main"
        transition = etree.SubElement(slide._element, f"{{{ns}}}transition")
        etree.SubElement(transition, f"{{{ns}}}{kind}")

    return build


def test_check_transition(tmp_path: Path) -> None:
    path = deck(tmp_path / "t.pptx", with_transition("dissolve"))
    assert METRICS["check_transition"](path, {"slide_idx": 0, "transition_type": "dissolve"}) == 1.0
    assert METRICS["check_transition"](path, {"slide_idx": 0, "transition_type": "fade"}) == 0.0


def with_slide_number(colour: str) -> Callable[[object], None]:
    def build(prs) -> None:
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        box = slide.shapes.add_textbox(Emu(0), Emu(0), Emu(100_000), Emu(100_000))
        a = "http://schemas.openxmlformats.org/drawingml/2006/main"
        paragraph = box.text_frame.paragraphs[0]._p
        field = etree.SubElement(paragraph, f"{{{a}}}fld", id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}", type="slidenum")
        fill = etree.SubElement(etree.SubElement(field, f"{{{a}}}rPr"), f"{{{a}}}solidFill")
        etree.SubElement(fill, f"{{{a}}}srgbClr", val=colour)
        etree.SubElement(field, f"{{{a}}}t").text = "1"

    return build


def test_check_page_number_colors(tmp_path: Path) -> None:
    assert METRICS["check_page_number_colors"](deck(tmp_path / "r.pptx", with_slide_number("C9211E")), {"color": "red"}) == 1.0
    assert METRICS["check_page_number_colors"](deck(tmp_path / "b.pptx", with_slide_number("2A6099")), {"color": "red"}) == 0.0

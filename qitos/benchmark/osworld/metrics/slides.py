"""Presentation metrics on .pptx files (python-pptx).

`compare_pptx_files` walks both decks slide by slide and shape by shape; each `examine_*` option switches
one family of checks. Position options used when `examine_shape` is off compare the *region* of a shape
(which half of the slide its centre is in) or a size within 2%, because users move and resize by hand and
will not reproduce the gold deck to the EMU.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._util import score

_DEFAULTS = {
    "examine_number_of_slides": True,
    "examine_shape": True,
    "examine_text": True,
    "examine_indent": True,
    "examine_font_name": True,
    "examine_font_size": True,
    "examine_font_bold": True,
    "examine_font_italic": True,
    "examine_color_rgb": True,
    "examine_font_underline": True,
    "examine_strike_through": True,
    "examine_alignment": True,
    "examine_bullets": True,
    "examine_background_color": True,
    "examine_note": True,
    "examine_title_bottom_position": False,
    "examine_table_bottom_position": False,
    "examine_right_position": False,
    "examine_top_position": False,
    "examine_image_size": False,
    "examine_modify_height": False,
    "examine_shape_for_shift_size": False,
}
_SIZE_TOLERANCE = 0.02


def _open(path: Any) -> Any:
    if path is None or not Path(path).is_file():
        return None
    from pptx import Presentation

    try:
        return Presentation(str(path))
    except Exception:  # noqa: BLE001 - a corrupt or non-pptx file is a failed result
        return None


def _options(options: Mapping[str, Any]) -> dict[str, bool]:
    merged = dict(_DEFAULTS)
    for key, value in options.items():
        key = "examine_alignment" if key == "examine_aligment" else key  # spelling used by one task file
        if key not in _DEFAULTS:
            raise ValueError(f"compare_pptx_files: unknown option '{key}'")
        merged[key] = bool(value)
    return merged


def _rgb(color_format: Any) -> str | None:
    try:
        return str(color_format.rgb) if color_format is not None and color_format.type is not None else None
    except AttributeError:
        return None


def _background(slide: Any) -> str | None:
    if not slide.follow_master_background:
        fill = slide.background.fill
        if fill.type == 1:  # MSO_FILL.SOLID
            return _rgb(fill.fore_color)
    return None


def _notes(slide: Any) -> str:
    return slide.notes_slide.notes_text_frame.text.strip() if slide.has_notes_slide else ""


def _bullet(paragraph: Any) -> tuple[str, str | None] | None:
    ppr = paragraph._p.pPr
    if ppr is None:
        return None
    for child in ppr:
        tag = child.tag.split("}")[-1]
        if tag in ("buChar", "buAutoNum", "buNone", "buBlip"):
            return tag, child.get("char") or child.get("type")
    return None


def _run_props(run: Any, opts: dict[str, bool]) -> tuple[Any, ...]:
    font = run.font
    props: list[Any] = []
    if opts["examine_font_name"]:
        props.append(font.name)
    if opts["examine_font_size"]:
        props.append(font.size)
    if opts["examine_font_bold"]:
        props.append(font.bold)
    if opts["examine_font_italic"]:
        props.append(font.italic)
    if opts["examine_color_rgb"]:
        props.append(_rgb(font.color))
    if opts["examine_font_underline"]:
        props.append(font.underline)
    if opts["examine_strike_through"]:
        props.append(run._r.rPr.get("strike") if run._r.rPr is not None else None)
    return tuple(props)


def _paragraph_sig(paragraph: Any, opts: dict[str, bool]) -> tuple[Any, ...]:
    sig: list[Any] = []
    if opts["examine_text"]:
        sig.append(paragraph.text)
    if opts["examine_indent"]:
        sig.append(paragraph.level)
    if opts["examine_alignment"]:
        sig.append(paragraph.alignment)
    if opts["examine_bullets"]:
        sig.append(_bullet(paragraph))
    sig.append(tuple(_run_props(r, opts) for r in paragraph.runs if r.text.strip()))
    return tuple(sig)


def _text_sig(shape: Any, opts: dict[str, bool]) -> tuple[Any, ...]:
    if shape.has_text_frame:
        return tuple(_paragraph_sig(p, opts) for p in shape.text_frame.paragraphs)
    if getattr(shape, "has_table", False) and shape.has_table:
        return tuple(
            tuple(_paragraph_sig(p, opts) for cell in row.cells for p in cell.text_frame.paragraphs)
            for row in shape.table.rows
        )
    return ()


def _center(shape: Any) -> tuple[float, float]:
    return (shape.left or 0) + (shape.width or 0) / 2, (shape.top or 0) + (shape.height or 0) / 2


def _close(a: Any, b: Any) -> bool:
    a, b = float(a or 0), float(b or 0)
    return abs(a - b) <= _SIZE_TOLERANCE * max(abs(a), abs(b), 1.0)


def _is_title(shape: Any) -> bool:
    return shape.is_placeholder and "TITLE" in str(shape.placeholder_format.type)


def _is_picture(shape: Any) -> bool:
    return shape.shape_type == 13  # MSO_SHAPE_TYPE.PICTURE


def _position_ok(a: Any, b: Any, width: int, height: int, opts: dict[str, bool]) -> bool:
    (ax, ay), (bx, by) = _center(a), _center(b)
    if opts["examine_title_bottom_position"] and _is_title(a) and (ay > height / 2) != (by > height / 2):
        return False
    is_table = getattr(a, "has_table", False) and a.has_table
    if opts["examine_table_bottom_position"] and is_table and (ay > height / 2) != (by > height / 2):
        return False
    if opts["examine_right_position"] and _is_picture(a) and (ax > width / 2) != (bx > width / 2):
        return False
    if opts["examine_top_position"] and _is_picture(a) and (ay < height / 2) != (by < height / 2):
        return False
    if opts["examine_image_size"] and _is_picture(a) and not (_close(a.width, b.width) and _close(a.height, b.height)):
        return False
    if opts["examine_modify_height"] and _is_picture(a) and not _close(a.height, b.height):
        return False
    if opts["examine_shape_for_shift_size"] and not all(_close(getattr(a, k), getattr(b, k)) for k in ("left", "top", "width")):
        return False
    return True


def compare_pptx_files(result: Any, expected: Any = None, **options: Any) -> float:
    """1 iff the decks agree on every enabled aspect: slide count, per-slide background and notes, shape
    count, shape geometry (`examine_shape`), paragraph text/indent/alignment/bullets and run fonts, tables."""
    opts = _options(options)
    a, b = _open(result), _open(expected)
    if a is None or b is None:
        return 0.0
    if opts["examine_number_of_slides"] and len(a.slides) != len(b.slides):
        return 0.0
    width, height = b.slide_width, b.slide_height
    for slide_a, slide_b in zip(a.slides, b.slides):
        if opts["examine_background_color"] and _background(slide_a) != _background(slide_b):
            return 0.0
        if opts["examine_note"] and _notes(slide_a) != _notes(slide_b):
            return 0.0
        shapes_a, shapes_b = list(slide_a.shapes), list(slide_b.shapes)
        if len(shapes_a) != len(shapes_b):
            return 0.0
        for sa, sb in zip(shapes_a, shapes_b):
            geometry = ("left", "top", "width", "height")
            if opts["examine_shape"] and any(getattr(sa, k) != getattr(sb, k) for k in geometry):
                return 0.0
            if not _position_ok(sa, sb, width, height, opts):
                return 0.0
            if _text_sig(sa, opts) != _text_sig(sb, opts):
                return 0.0
    return 1.0


def check_slide_orientation_Portrait(result: Any, expected: Any = None, **_: Any) -> float:  # noqa: N802 - upstream name
    """1 iff the deck's slides are taller than wide."""
    prs = _open(result)
    return score(prs is not None and prs.slide_height > prs.slide_width)


def _effective_background(slide: Any) -> tuple[int, int, int] | None:
    for source in (slide, slide.slide_layout, slide.slide_layout.slide_master):
        fill = source.background.fill
        if fill.type == 1:
            rgb = _rgb(fill.fore_color)
            if rgb:
                return int(rgb[0:2], 16), int(rgb[2:4], 16), int(rgb[4:6], 16)
    return None


def evaluate_presentation_fill_to_rgb_distance(result: Any, expected: Any = None, **_: Any) -> float:
    """Graded: mean over slides of 1 - d/dmax, d being the RGB distance between the slide's solid
    background (own, layout or master) and `rules.rgb`; a slide without a solid background scores 0."""
    prs = _open(result)
    if prs is None or not isinstance(expected, Mapping) or not len(prs.slides):
        return 0.0
    target = [int(v) for v in expected.get("rgb", [])]
    dmax = (3 * 255**2) ** 0.5
    scores = []
    for slide in prs.slides:
        colour = _effective_background(slide)
        if colour is None:
            scores.append(0.0)
        else:
            distance = sum((x - y) ** 2 for x, y in zip(colour, target)) ** 0.5
            scores.append(1.0 - distance / dmax)
    return sum(scores) / len(scores)


def check_transition(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff slide `rules.slide_idx` has a transition whose effect element is `rules.transition_type`."""
    prs = _open(result)
    if prs is None or not isinstance(expected, Mapping):
        return 0.0
    index = int(expected.get("slide_idx", 0))
    if not 0 <= index < len(prs.slides):
        return 0.0
    want = str(expected.get("transition_type"))
    for element in prs.slides[index]._element.iter():
        if element.tag.split("}")[-1] == "transition":
            if any(child.tag.split("}")[-1] == want for child in element):
                return 1.0
    return 0.0


def check_image_stretch_and_center(result: Any, expected: Any = None, **_: Any) -> float:
    """First slide's picture: same aspect ratio as in the original deck, fills the slide in one dimension
    and is centred (each within 2%)."""
    a, b = _open(result), _open(expected)
    if a is None or b is None or not len(a.slides) or not len(b.slides):
        return 0.0
    pics_a = [s for s in a.slides[0].shapes if _is_picture(s)]
    pics_b = [s for s in b.slides[0].shapes if _is_picture(s)]
    if not pics_a or not pics_b:
        return 0.0
    pic, original = pics_a[0], pics_b[0]
    width, height = a.slide_width, a.slide_height
    same_ratio = _close(pic.width / pic.height, original.width / original.height)
    fills = _close(pic.width, width) or _close(pic.height, height)
    cx, cy = _center(pic)
    centred = _close(cx, width / 2) and _close(cy, height / 2)
    return score(same_ratio and fills and centred)


_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


def _hue(hex_rgb: str) -> str | None:
    r, g, b = (int(hex_rgb[i : i + 2], 16) for i in (0, 2, 4))
    if r > g and r > b:
        return "red"
    if g > r and g > b:
        return "green"
    if b > r and b > g:
        return "blue"
    return None


def check_page_number_colors(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every slide-number field (`a:fld type="slidenum"`) has an explicit sRGB colour whose dominant
    channel is `rules.color` (red, green or blue), and there is at least one such field."""
    prs = _open(result)
    if prs is None or not isinstance(expected, Mapping):
        return 0.0
    fields = [f for slide in prs.slides for f in slide._element.iter(f"{_A}fld") if f.get("type") == "slidenum"]
    if not fields:
        return 0.0
    for field in fields:
        colour = field.find(f"{_A}rPr/{_A}solidFill/{_A}srgbClr")
        if colour is None or _hue(colour.get("val", "000000")) != expected.get("color"):
            return 0.0
    return 1.0


METRICS = {
    "compare_pptx_files": compare_pptx_files,
    "check_slide_orientation_Portrait": check_slide_orientation_Portrait,
    "evaluate_presentation_fill_to_rgb_distance": evaluate_presentation_fill_to_rgb_distance,
    "check_transition": check_transition,
    "check_image_stretch_and_center": check_image_stretch_and_center,
    "check_page_number_colors": check_page_number_colors,
}

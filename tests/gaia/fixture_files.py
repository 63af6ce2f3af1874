"""Writers for the synthetic attachments of the GAIA-shaped test fixture (one per format).

All content is invented here; nothing comes from GAIA. Files are written at test time
into a temporary folder and never stored in the repository.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return path


def write_xlsx(path: Path, rows: list[list[object]], *, title: str = "Sheet1",
               fills: dict[str, str] | None = None) -> Path:
    """One-sheet workbook; `fills` maps cell coordinates to solid ARGB fill colours."""
    from openpyxl import Workbook
    from openpyxl.styles import PatternFill

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    for coordinate, colour in (fills or {}).items():
        sheet[coordinate].fill = PatternFill(fill_type="solid", start_color=colour, end_color=colour)
    workbook.save(path)
    return path


def write_docx(path: Path, heading: str, paragraphs: list[str], table: list[list[str]]) -> Path:
    """A heading, some paragraphs, then a table whose first row is the header."""
    from docx import Document

    document = Document()
    document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    grid = document.add_table(rows=len(table), cols=len(table[0]))
    for r, row in enumerate(table):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    document.add_paragraph("End of document.")
    document.save(str(path))
    return path


def write_pptx(path: Path, slides: list[tuple[str, str]], *, notes: dict[int, str] | None = None) -> Path:
    """Title-and-content slides from (title, body) pairs; `notes` maps slide index to speaker notes."""
    from pptx import Presentation

    presentation = Presentation()
    layout = presentation.slide_layouts[1]
    for index, (title, body) in enumerate(slides):
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes and index in notes:
            slide.notes_slide.notes_text_frame.text = notes[index]
    presentation.save(str(path))
    return path


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A minimal text PDF (Helvetica, one line per entry) with a correct cross-reference table."""
    font_id = 3 + 2 * len(pages)
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    for i, lines in enumerate(pages):
        content_id = 4 + 2 * i
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            ops.append(f"({_pdf_escape(line)}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def write_zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def write_image(path: Path, size: tuple[int, int], *, exif: dict[int, object] | None = None,
                gps: dict[int, object] | None = None, colour: tuple[int, int, int] = (30, 120, 200)) -> Path:
    """A flat-colour RGB image (format from the suffix) with optional EXIF and GPS tags."""
    from PIL import ExifTags, Image

    image = Image.new("RGB", size, colour)
    tags = Image.Exif()
    for key, value in (exif or {}).items():
        tags[key] = value
    if gps:
        tags[ExifTags.IFD.GPSInfo] = dict(gps)  # set the IFD itself: Pillow 11.0 does not keep get_ifd()'s new dict
    image.save(path, exif=tags)
    return path

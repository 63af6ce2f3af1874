"""Agent side: turn GAIA attachments into text an agent can read.

One reader per format, each importing its library only when needed so the base install
stays light (`pip install 'qitos[gaia]'` brings them all). Output is capped by
`truncate`, which says how much was cut so the agent can page on.
"""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path
from typing import Callable

__all__ = [
    "AttachmentError",
    "UnsupportedFileType",
    "UnsafeArchiveError",
    "SUPPORTED_SUFFIXES",
    "read_attachment",
    "extract_zip_safely",
    "truncate",
]

DEFAULT_MAX_CHARS = 20_000
MAX_ZIP_MEMBERS = 10_000
MAX_ZIP_BYTES = 500 * 1024 * 1024


class AttachmentError(ValueError):
    """An attachment exists but cannot be read (corrupt, encrypted, ...)."""


class UnsupportedFileType(AttachmentError):
    """No reader exists for this file type."""


class UnsafeArchiveError(AttachmentError):
    """A zip member would land outside the extraction folder, or the archive is too large."""


def truncate(text: str, max_chars: int, *, offset: int = 0) -> str:
    """Return `text[offset:offset+max_chars]`, with a note saying what was left out and how to get it."""
    total = len(text)
    piece = text[offset : offset + max_chars]
    end = offset + len(piece)
    if offset == 0 and end >= total:
        return piece
    note = f"[showing characters {offset}-{end} of {total}"
    note += f"; continue with offset={end}]" if end < total else "; end of text]"
    return f"{piece}\n{note}"


def _import(module: str, package: str, path: Path):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise AttachmentError(
            f"{path.name}: reading this type needs the '{package}' package; install it with `pip install 'qitos[gaia]'`"
        ) from exc


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _read_json(path: Path) -> str:
    raw = _read_text(path)
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except json.JSONDecodeError as exc:
        return f"[not valid JSON: {exc.msg} at line {exc.lineno}; raw text follows]\n{raw}"


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).replace("\n", " ")


def _fill_colour(cell) -> str | None:
    """The cell's solid fill as ARGB hex (or theme/indexed colour), None when unfilled."""
    fill = cell.fill
    if fill is None or not fill.fill_type:
        return None
    colour = fill.fgColor
    if colour.type == "rgb" and isinstance(colour.rgb, str) and colour.rgb != "00000000":
        return colour.rgb
    if colour.type == "theme":
        return f"theme {colour.theme}"
    if colour.type == "indexed" and colour.indexed != 64:  # 64 is the system foreground
        return f"indexed {colour.indexed}"
    return None


def _read_xlsx(path: Path) -> str:
    openpyxl = _import("openpyxl", "openpyxl", path)
    from openpyxl.utils import get_column_letter

    try:
        values = openpyxl.load_workbook(path, data_only=True)
        formulas = openpyxl.load_workbook(path, data_only=False)
    except Exception as exc:
        raise AttachmentError(f"{path.name}: not a readable Excel workbook: {exc}") from exc
    parts: list[str] = []
    for sheet in values.worksheets:
        formula_sheet = formulas[sheet.title]
        parts.append(f"## Sheet '{sheet.title}' ({sheet.max_row} rows x {sheet.max_column} columns)")
        header = ["row"] + [get_column_letter(c) for c in range(1, sheet.max_column + 1)]
        parts.append(" | ".join(header))
        fills: list[str] = []
        for row in sheet.iter_rows():
            cells = []
            for cell in row:
                value = cell.value
                if value is None:
                    formula = formula_sheet[cell.coordinate].value
                    value = formula if isinstance(formula, str) and formula.startswith("=") else None
                cells.append(_cell_text(value))
                color = _fill_colour(cell)
                if color:
                    fills.append(f"{cell.coordinate}={color}")
            if any(cells):
                parts.append(" | ".join([str(row[0].row)] + cells))
        if fills:
            parts.append("Cell fill colours (ARGB): " + ", ".join(fills))
    return "\n".join(parts)


def _docx_table(table) -> list[str]:
    lines = ["[table]"]
    for row in table.rows:
        lines.append(" | ".join(cell.text.strip().replace("\n", " ") for cell in row.cells))
    lines.append("[end table]")
    return lines


def _read_docx(path: Path) -> str:
    docx = _import("docx", "python-docx", path)
    from docx.table import Table

    try:
        document = docx.Document(str(path))
    except Exception as exc:
        raise AttachmentError(f"{path.name}: not a readable Word document: {exc}") from exc
    lines: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            lines.extend(_docx_table(block))
            continue
        text = block.text.strip()
        if not text:
            continue
        style = block.style.name if block.style is not None else ""
        if style.startswith("Heading") and style[-1:].isdigit():
            text = "#" * int(style[-1]) + " " + text
        elif style == "Title":
            text = "# " + text
        lines.append(text)
    return "\n".join(lines)


def _pptx_shape_lines(shape) -> list[str]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    lines: list[str] = []
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in shape.shapes:
            lines.extend(_pptx_shape_lines(inner))
        return lines
    if getattr(shape, "has_table", False) and shape.has_table:
        lines.append("[table]")
        for row in shape.table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
        lines.append("[end table]")
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        text = shape.text_frame.text.strip()
        if text:
            lines.append(text)
    elif shape.shape_type == MSO_SHAPE_TYPE.PICTURE:
        lines.append(f"[picture: {shape.name}]")
    return lines


def _read_pptx(path: Path) -> str:
    pptx = _import("pptx", "python-pptx", path)
    try:
        presentation = pptx.Presentation(str(path))
    except Exception as exc:
        raise AttachmentError(f"{path.name}: not a readable PowerPoint file: {exc}") from exc
    parts: list[str] = []
    for number, slide in enumerate(presentation.slides, start=1):
        parts.append(f"## Slide {number}")
        for shape in slide.shapes:
            parts.extend(_pptx_shape_lines(shape))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip() if slide.notes_slide.notes_text_frame else ""
            if notes:
                parts.append(f"[speaker notes] {notes}")
    return "\n".join(parts)


def _read_pdf(path: Path) -> str:
    pypdf = _import("pypdf", "pypdf", path)
    try:
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentError(f"{path.name}: the PDF is password-protected")
        pages = [f"## Page {n}\n{(page.extract_text() or '').strip()}" for n, page in enumerate(reader.pages, 1)]
    except AttachmentError:
        raise
    except Exception as exc:
        raise AttachmentError(f"{path.name}: not a readable PDF: {exc}") from exc
    return "\n".join(pages)


def _image_value(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").strip("\x00 ") if len(value) <= 64 else f"<{len(value)} bytes>"
    if isinstance(value, tuple):
        return "(" + ", ".join(_image_value(v) for v in value) + ")"
    return str(value)


def _read_image(path: Path) -> str:
    _import("PIL", "Pillow", path)
    from PIL import ExifTags, Image

    try:
        with Image.open(path) as image:
            lines = [f"image {path.name}: format {image.format}, {image.width}x{image.height} pixels, mode {image.mode}"]
            exif = image.getexif()
            gps = exif.get_ifd(ExifTags.IFD.GPSInfo) if exif else {}
            details = exif.get_ifd(ExifTags.IFD.Exif) if exif else {}
            # text chunks (PNG tEXt, comments) and resolution; codec internals are left out
            info = {k: v for k, v in image.info.items() if isinstance(v, str) or k == "dpi"}
    except Exception as exc:
        raise AttachmentError(f"{path.name}: not a readable image: {exc}") from exc
    tags = {ExifTags.TAGS.get(k, str(k)): v for k, v in list(exif.items()) + list(details.items())}
    tags.pop("GPSInfo", None)
    tags.pop("ExifOffset", None)
    if tags:
        lines.append("EXIF:")
        lines.extend(f"  {name}: {_image_value(value)}" for name, value in sorted(tags.items()))
    else:
        lines.append("no EXIF metadata")
    if gps:
        lines.append("GPS:")
        lines.extend(f"  {ExifTags.GPSTAGS.get(k, str(k))}: {_image_value(v)}" for k, v in sorted(gps.items()))
    if info:
        lines.append("Embedded info:")
        lines.extend(f"  {key}: {_image_value(value)}" for key, value in sorted(info.items()))
    lines.append("(the pixels themselves are not described; inspect them with run_python if needed)")
    return "\n".join(lines)


def _member_is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def extract_zip_safely(archive: Path, destination: Path) -> list[Path]:
    """Extract `archive` into `destination`, refusing members that would escape it (zip-slip).

    Absolute names, `..` components and symlinks are rejected before anything is written,
    as are archives above MAX_ZIP_MEMBERS members or MAX_ZIP_BYTES uncompressed.
    """
    try:
        handle = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise AttachmentError(f"{archive.name}: not a readable zip archive: {exc}") from exc
    destination = destination.resolve()
    with handle:
        members = handle.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise UnsafeArchiveError(f"{archive.name}: {len(members)} members exceeds the limit of {MAX_ZIP_MEMBERS}")
        if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
            raise UnsafeArchiveError(f"{archive.name}: uncompressed size exceeds {MAX_ZIP_BYTES} bytes")
        for member in members:
            target = (destination / member.filename).resolve()
            name = member.filename.replace("\\", "/")
            if name.startswith("/") or ".." in name.split("/") or not target.is_relative_to(destination):
                raise UnsafeArchiveError(f"{archive.name}: member '{member.filename}' would extract outside {destination}")
            if _member_is_symlink(member):
                raise UnsafeArchiveError(f"{archive.name}: member '{member.filename}' is a symbolic link")
        destination.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for member in members:
            handle.extract(member, destination)
            if not member.is_dir():
                written.append(destination / member.filename)
    return written


def _read_zip(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as handle:
            members = [m for m in handle.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError) as exc:
        raise AttachmentError(f"{path.name}: not a readable zip archive: {exc}") from exc
    lines = [f"zip archive {path.name} with {len(members)} file(s):"]
    lines.extend(f"  {m.filename} ({m.file_size} bytes)" for m in members)
    lines.append("(extract it with extract_zip, then read the files one by one)")
    return "\n".join(lines)


_READERS: dict[str, Callable[[Path], str]] = {
    **{s: _read_text for s in (".txt", ".md", ".csv", ".tsv", ".py", ".xml", ".html", ".htm", ".log", ".pdb")},
    ".json": _read_json,
    ".jsonld": _read_json,
    ".xlsx": _read_xlsx,
    ".xlsm": _read_xlsx,
    ".docx": _read_docx,
    ".pptx": _read_pptx,
    ".pdf": _read_pdf,
    ".zip": _read_zip,
    **{s: _read_image for s in (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")},
}
SUPPORTED_SUFFIXES = tuple(sorted(_READERS))
_HINTS = {
    ".mp3": "audio is not transcribed by the GAIA toolset",
    ".wav": "audio is not transcribed by the GAIA toolset",
    ".m4a": "audio is not transcribed by the GAIA toolset",
    ".mp4": "video is not supported by the GAIA toolset",
    ".xls": "legacy .xls workbooks are not supported; only .xlsx",
    ".doc": "legacy .doc files are not supported; only .docx",
    ".ppt": "legacy .ppt files are not supported; only .pptx",
}


def _looks_like_text(path: Path) -> bool:
    with path.open("rb") as handle:
        sample = handle.read(8192)
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(sample) - 4  # only a multi-byte character cut at the sample's end
    return True


def read_attachment(path: Path, *, max_chars: int = DEFAULT_MAX_CHARS, offset: int = 0) -> str:
    """Text rendering of one file, truncated to `max_chars` starting at `offset`.

    Unknown extensions are shown as text when the bytes are UTF-8 without NULs; anything
    else raises UnsupportedFileType, whose message says what is supported.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    suffix = path.suffix.lower()
    reader = _READERS.get(suffix)
    if reader is None:
        if suffix not in _HINTS and _looks_like_text(path):
            return truncate(_read_text(path), max_chars, offset=offset)
        hint = _HINTS.get(suffix, "binary file with no reader")
        raise UnsupportedFileType(
            f"{path.name}: cannot read '{suffix or 'no extension'}' files ({hint}); "
            f"supported: {', '.join(SUPPORTED_SUFFIXES)}. You may inspect it with run_python."
        )
    return truncate(reader(path), max_chars, offset=offset)

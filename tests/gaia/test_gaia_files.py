"""Attachment readers on every supported type, truncation, unsupported types and zip-slip."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from qitos.benchmark.gaia.files import (
    AttachmentError,
    UnsafeArchiveError,
    UnsupportedFileType,
    extract_zip_safely,
    read_attachment,
    truncate,
)

from . import fixture_files as ff
from .make_fixture import build_gaia_fixture


@pytest.fixture(scope="module")
def attachments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gaia_fixture(tmp_path_factory.mktemp("gaia")) / "2023" / "validation"


@pytest.mark.parametrize(
    "name,expected",
    [
        ("shopping_list.txt", ["- apples: 4", "more apples: 3"]),
        ("moons.md", ["| Borealis | 12 |"]),
        ("harvest.csv", ["month,crop,tonnes", "March,barley,499.5"]),
        ("inventory.json", ['"name": "Brass telescope"', '"price": 310.0']),
        ("author.jsonld", ['"@type": "Person"', '"birthDate": "1897-03-14"']),
        ("payroll.xlsx", ["## Sheet 'Payroll' (5 rows x 3 columns)", "row | A | B | C",
                          "3 | Mira Solberg | Research | 7150", "5 | Total |  | =SUM(C2:C4)"]),
        ("garden.xlsx", ["Cell fill colours (ARGB): B2=FF00B050, D2=FF00B050, C3=FFFF0000"]),
        ("gazetteer.docx", ["# Gazetteer of invented countries", "[table]", "Valdoria | Port Emmer",
                            "[end table]\nEnd of document."]),
        ("tour.pptx", ["## Slide 1\nDay one", "## Slide 3\nDay three\nWildlife park: we met a kangaroo",
                       "[speaker notes] Remember the tickets"]),
        ("invoice.pdf", ["## Page 1", "Invoice 2023-117", "## Page 2", "Grand total: $1,234.50"]),
        ("letters.zip", ["with 4 file(s)", "letters/to_ada.txt (50 bytes)", "extract_zip"]),
        ("photo.jpg", ["format JPEG, 64x48 pixels, mode RGB", "Make: Qit Optics", "Model: QitCam 3000",
                       "GPSLatitudeRef: N", "GPSLatitude: (59.0, 19.0, 30.0)"]),
        ("diagram.png", ["format PNG, 320x200 pixels", "Artist: R. Lindqvist"]),
    ],
)
def test_reader_renders_each_type(attachments: Path, name: str, expected: list[str]) -> None:
    text = read_attachment(attachments / name)
    for fragment in expected:
        assert fragment in text, f"{fragment!r} missing from the rendering of {name}:\n{text}"


def test_xlsx_shows_cached_values_over_formulas(tmp_path: Path) -> None:
    from openpyxl import load_workbook

    path = ff.write_xlsx(tmp_path / "cached.xlsx", [["a", 2], ["b", "=1+1"]])
    workbook = load_workbook(path)
    workbook.active["C1"] = 3.0  # a float that is a whole number is shown without ".0"
    workbook.save(path)
    text = read_attachment(path)
    assert "2 | b | =1+1" in text and "1 | a | 2 | 3" in text


def test_image_without_metadata(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("L", (5, 7)).save(tmp_path / "plain.bmp")
    text = read_attachment(tmp_path / "plain.bmp")
    assert "5x7 pixels, mode L" in text and "no EXIF" in text


def test_invalid_json_is_shown_raw(tmp_path: Path) -> None:
    text = read_attachment(ff.write_text(tmp_path / "bad.json", "{'not': json}"))
    assert text.startswith("[not valid JSON") and "{'not': json}" in text


def test_unknown_text_extension_is_read_as_text(tmp_path: Path) -> None:
    assert read_attachment(ff.write_text(tmp_path / "protein.ent", "ATOM 1 N\n")) == "ATOM 1 N\n"


@pytest.mark.parametrize("name,hint", [("song.mp3", "audio"), ("blob.bin", "binary"), ("old.xls", "legacy")])
def test_unsupported_types_are_named(tmp_path: Path, name: str, hint: str) -> None:
    (tmp_path / name).write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(UnsupportedFileType, match=rf"{name}: cannot read .*{hint}.*supported: .*\.docx"):
        read_attachment(tmp_path / name)


@pytest.mark.parametrize("name", ["broken.pdf", "broken.docx", "broken.pptx", "broken.xlsx", "broken.png", "broken.zip"])
def test_corrupt_files_raise_clear_errors(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"this is not really that format")
    with pytest.raises(AttachmentError, match=name):
        read_attachment(tmp_path / name)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing.txt"):
        read_attachment(tmp_path / "nothing.txt")


def test_truncation_note_and_paging(tmp_path: Path) -> None:
    path = ff.write_text(tmp_path / "long.txt", "x" * 250)
    first = read_attachment(path, max_chars=100)
    assert first.startswith("x" * 100) and "[showing characters 0-100 of 250; continue with offset=100]" in first
    last = read_attachment(path, max_chars=100, offset=200)
    assert last.startswith("x" * 50) and "end of text" in last
    assert truncate("short", 100) == "short"


def test_zip_extraction(attachments: Path, tmp_path: Path) -> None:
    written = extract_zip_safely(attachments / "letters.zip", tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == [
        "letters/to_ada.txt", "letters/to_bram.txt", "letters/to_cleo.txt", "notes/summary.md"]
    assert (tmp_path / "out" / "letters" / "to_ada.txt").read_text().startswith("Dear Ada")


@pytest.mark.parametrize("member", ["../escape.txt", "a/../../escape.txt", "/abs/escape.txt", "..\\escape.txt"])
def test_zip_slip_is_refused(tmp_path: Path, member: str) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("fine.txt", "ok")
        handle.writestr(member, "gotcha")
    with pytest.raises(UnsafeArchiveError, match="outside"):
        extract_zip_safely(archive, tmp_path / "dest")
    assert not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "dest" / "fine.txt").exists()  # nothing is written before the check


def test_zip_symlink_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "link.zip"
    info = zipfile.ZipInfo("link")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr(info, "/etc/passwd")
    with pytest.raises(UnsafeArchiveError, match="symbolic link"):
        extract_zip_safely(archive, tmp_path / "dest")

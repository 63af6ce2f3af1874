"""Builders for the synthetic files the OSWorld metric tests score (generated on the fly, never stored)."""

from __future__ import annotations

import zipfile
from pathlib import Path


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A minimal valid PDF (Helvetica, one text line per page) written by hand, since pypdf cannot add text."""
    objects: list[bytes] = []
    page_ids = [3 + 2 * i for i in range(len(pages))]
    font_id = 3 + 2 * len(pages)
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    for index, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        content_id = page_ids[index] + 1
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def write_id3_mp3(path: Path, title: str, artist: str) -> Path:
    """An ID3v2.3 tag (TIT2, TPE1; UTF-16 text) followed by a few silent MPEG frame bytes."""

    def frame(frame_id: str, text: str) -> bytes:
        payload = b"\x01" + text.encode("utf-16")
        return frame_id.encode() + len(payload).to_bytes(4, "big") + b"\x00\x00" + payload

    body = frame("TIT2", title) + frame("TPE1", artist)
    size = len(body)
    synchsafe = bytes([(size >> 21) & 0x7F, (size >> 14) & 0x7F, (size >> 7) & 0x7F, size & 0x7F])
    path.write_bytes(b"ID3\x03\x00\x00" + synchsafe + body + b"\xff\xfb\x90\x00" * 8)
    return path


def add_pivot(xlsx: Path, sheet_part: str, fields: list[str], rows: list[int], cols: list[int], data: list[int]) -> None:
    """Append a pivot table part (plus its cache definition) to a sheet of an existing .xlsx package."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel_base = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    cache = (
        f'<pivotCacheDefinition xmlns="{main}"><cacheSource type="worksheet">'
        f'<worksheetSource ref="A1:C10" sheet="Sheet1"/></cacheSource><cacheFields count="{len(fields)}">'
        + "".join(f'<cacheField name="{name}"/>' for name in fields)
        + "</cacheFields></pivotCacheDefinition>"
    )
    pivot = (
        f'<pivotTableDefinition xmlns="{main}" name="PivotTable1" cacheId="1" dataCaption="Values"><location ref="A3:C8" firstHeaderRow="1" firstDataRow="1" firstDataCol="1"/>'
        f'<rowFields count="{len(rows)}">' + "".join(f'<field x="{r}"/>' for r in rows) + "</rowFields>"
        f'<colFields count="{len(cols)}">' + "".join(f'<field x="{c}"/>' for c in cols) + "</colFields>"
        f'<dataFields count="{len(data)}">' + "".join(f'<dataField fld="{d}" subtotal="sum"/>' for d in data)
        + "</dataFields></pivotTableDefinition>"
    )
    sheet_name = sheet_part.rsplit("/", 1)[-1]
    sheet_rels = (
        f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        f'<Relationship Id="rIdP1" Type="{rel_base}/pivotTable" Target="../pivotTables/pivotTable1.xml"/>'
        "</Relationships>"
    )
    pivot_rels = (
        f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        f'<Relationship Id="rId1" Type="{rel_base}/pivotCacheDefinition" '
        'Target="../pivotCache/pivotCacheDefinition1.xml"/></Relationships>'
    )
    with zipfile.ZipFile(xlsx) as package:
        members = {name: package.read(name) for name in package.namelist()}
    workbook = members["xl/workbook.xml"].decode()
    caches = f'<pivotCaches xmlns:r="{rel_base}"><pivotCache cacheId="1" r:id="rIdPC1"/></pivotCaches>'
    members["xl/workbook.xml"] = workbook.replace("</workbook>", caches + "</workbook>").encode()
    rel = (f'<Relationship Id="rIdPC1" Type="{rel_base}/pivotCacheDefinition" '
           'Target="pivotCache/pivotCacheDefinition1.xml"/></Relationships>')
    members["xl/_rels/workbook.xml.rels"] = members["xl/_rels/workbook.xml.rels"].decode().replace("</Relationships>", rel).encode()
    members[f"xl/worksheets/_rels/{sheet_name}.rels"] = sheet_rels.encode()
    members["xl/pivotTables/pivotTable1.xml"] = pivot.encode()
    members["xl/pivotTables/_rels/pivotTable1.xml.rels"] = pivot_rels.encode()
    members["xl/pivotCache/pivotCacheDefinition1.xml"] = cache.encode()
    with zipfile.ZipFile(xlsx, "w", zipfile.ZIP_DEFLATED) as package:
        for name, data in members.items():
            package.writestr(name, data)

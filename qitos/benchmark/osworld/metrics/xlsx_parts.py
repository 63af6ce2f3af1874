"""Read charts and pivot tables straight from an .xlsx package (openpyxl drops charts when loading a file
and keeps pivot tables only as opaque objects), by following the OOXML relationship parts."""

from __future__ import annotations

import posixpath
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
    "c": "http://schemas.openxmlformats.org/drawingml/2006/chart",
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
}
_R_ID = f"{{{NS['r']}}}id"


class XlsxParts:
    """Relationship-aware access to one workbook package."""

    def __init__(self, path: str | Path) -> None:
        self._zip = zipfile.ZipFile(path)
        self._names = set(self._zip.namelist())

    def close(self) -> None:
        self._zip.close()

    def _xml(self, name: str) -> ET.Element | None:
        if name not in self._names:
            return None
        return ET.fromstring(self._zip.read(name))

    def _rels(self, part: str) -> dict[str, tuple[str, str]]:
        """{rId: (type suffix, absolute target part)} of a part."""
        folder, base = posixpath.split(part)
        root = self._xml(posixpath.join(folder, "_rels", base + ".rels"))
        rels: dict[str, tuple[str, str]] = {}
        for rel in root.findall("rel:Relationship", NS) if root is not None else []:
            target = rel.get("Target", "")
            absolute = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
            rels[rel.get("Id", "")] = (rel.get("Type", "").rsplit("/", 1)[-1], absolute)
        return rels

    def sheet_parts(self) -> dict[str, str]:
        """Sheet name -> worksheet part name, in workbook order."""
        workbook = self._xml("xl/workbook.xml")
        rels = self._rels("xl/workbook.xml")
        result: dict[str, str] = {}
        for sheet in workbook.findall("m:sheets/m:sheet", NS) if workbook is not None else []:
            rel = rels.get(sheet.get(_R_ID, ""))
            if rel:
                result[sheet.get("name", "")] = rel[1]
        return result

    def charts(self, sheet_name: str) -> list[dict[str, Any]]:
        """Charts drawn on a sheet: type (e.g. `barChart`), title, bar direction, legend, axis titles."""
        part = self.sheet_parts().get(sheet_name)
        if part is None:
            return []
        charts = []
        for kind, drawing in self._rels(part).values():
            if kind != "drawing":
                continue
            for chart_kind, chart_part in self._rels(drawing).values():
                if chart_kind == "chart":
                    root = self._xml(chart_part)
                    if root is not None:
                        charts.append(_chart_info(root))
        return charts

    def pivots(self, sheet_name: str) -> list[dict[str, Any]]:
        """Pivot tables on a sheet with field names resolved through their cache definition."""
        part = self.sheet_parts().get(sheet_name)
        if part is None:
            return []
        pivots = []
        for kind, pivot_part in self._rels(part).values():
            if kind != "pivotTable":
                continue
            root = self._xml(pivot_part)
            if root is None:
                continue
            names: list[str] = []
            source: str | None = None
            for cache_kind, cache_part in self._rels(pivot_part).values():
                if cache_kind == "pivotCacheDefinition":
                    cache = self._xml(cache_part)
                    if cache is not None:
                        names = [f.get("name", "") for f in cache.findall("m:cacheFields/m:cacheField", NS)]
                        ws = cache.find("m:cacheSource/m:worksheetSource", NS)
                        source = None if ws is None else f"{ws.get('sheet', '')}!{ws.get('ref', '')}"
            pivots.append(_pivot_info(root, names, source))
        return sorted(pivots, key=lambda p: str(p.get("location")))


def _text(element: ET.Element | None) -> str | None:
    if element is None:
        return None
    parts = [t.text or "" for t in element.iter(f"{{{NS['a']}}}t")]
    if not parts:
        parts = [v.text or "" for v in element.iter(f"{{{NS['c']}}}v")]
    return "".join(parts) if parts else None


def _chart_info(root: ET.Element) -> dict[str, Any]:
    chart = root.find("c:chart", NS)
    plot = chart.find("c:plotArea", NS) if chart is not None else None
    kinds = [child for child in (plot if plot is not None else []) if child.tag.endswith("Chart")]
    first = kinds[0] if kinds else None
    direction = first.find("c:barDir", NS) if first is not None else None
    axis_titles = [_text(ax.find("c:title", NS)) for ax in (plot if plot is not None else []) if ax.tag.endswith("Ax")]
    return {
        "type": first.tag.split("}")[-1] if first is not None else None,
        "title": _text(chart.find("c:title", NS)) if chart is not None else None,
        "direction": direction.get("val") if direction is not None else None,
        "legend": chart is not None and chart.find("c:legend", NS) is not None,
        "xtitle": axis_titles[0] if axis_titles else None,
        "ytitle": axis_titles[1] if len(axis_titles) > 1 else None,
    }


def _pivot_info(root: ET.Element, names: list[str], source: str | None) -> dict[str, Any]:
    def name(index: str | None) -> str:
        if index is None:
            return ""
        i = int(index)
        if i == -2:
            return "<values>"
        return names[i] if 0 <= i < len(names) else f"#{i}"

    location = root.find("m:location", NS)
    return {
        "name": root.get("name"),
        "location": location.get("ref") if location is not None else None,
        "source": source,
        "row_fields": [name(f.get("x")) for f in root.findall("m:rowFields/m:field", NS)],
        "col_fields": [name(f.get("x")) for f in root.findall("m:colFields/m:field", NS)],
        "filter": [name(f.get("fld")) for f in root.findall("m:pageFields/m:pageField", NS)],
        "data_fields": [
            (name(f.get("fld")), f.get("subtotal", "sum")) for f in root.findall("m:dataFields/m:dataField", NS)
        ],
    }

"""Spreadsheet metrics: `compare_table` with its rule types, and spreadsheet checks used by single tasks.

Sheet selectors (`sheet_idx`, `sheet_idx0`, `sheet_idx1`): an int is a sheet index in the result workbook;
`RI<n>`/`RN<name>` select by index/name in the result, `EI<n>`/`EN<name>` in the expected workbook.
Values are the cached cell values (what the user sees), read with openpyxl `data_only=True`.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._util import as_list, match_rule, score, values_equal
from .xlsx_parts import XlsxParts


def _openpyxl() -> Any:
    import openpyxl

    return openpyxl


class _Book:
    """One workbook, loaded once (values and styles)."""

    def __init__(self, path: Any) -> None:
        self.path = Path(path)
        self.wb = _openpyxl().load_workbook(self.path, data_only=True)

    def sheet(self, key: str | int) -> Any:
        if isinstance(key, int):
            return self.wb.worksheets[key] if -len(self.wb.worksheets) <= key < len(self.wb.worksheets) else None
        return self.wb[key] if key in self.wb.sheetnames else None


def _select(selector: Any, result: _Book, expected: _Book | None) -> Any:
    """Resolve a sheet selector to (book, worksheet); None when it names nothing."""
    if isinstance(selector, int):
        book, key = result, selector
    else:
        text = str(selector)
        book = result if text[:1] == "R" else expected if text[:1] == "E" else None
        if book is None or len(text) < 2 or text[1] not in "IN":
            return None
        key = int(text[2:]) if text[1] == "I" else text[2:]
    ws = book.sheet(key)
    return None if ws is None else (book, ws)


def _norm(value: Any, ignore_case: bool) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dt.datetime) and value.time() == dt.time(0):
        return value.date()
    if isinstance(value, str):
        return value.lower() if ignore_case else value
    return value


def _grid(ws: Any, ignore_case: bool = False) -> list[list[Any]]:
    rows = [[_norm(v, ignore_case) for v in row] for row in ws.iter_rows(values_only=True)]
    while rows and all(v == "" for v in rows[-1]):
        rows.pop()
    width = max((max((i + 1 for i, v in enumerate(r) if v != ""), default=0) for r in rows), default=0)
    return [r[:width] + [""] * (width - len(r)) for r in rows]


def _grids_equal(a: list[list[Any]], b: list[list[Any]]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(values_equal(u, v) for u, v in zip(x, y)) for x, y in zip(a, b)
    )


def cell_prop(cell: Any, prop: str) -> Any:
    """One property of a cell: value, bgcolor, font_* , number_format, horizontal_alignment."""
    if prop == "value":
        return cell.value
    if prop == "bgcolor":
        fill = cell.fill
        return _rgb(fill.fgColor) if fill is not None and fill.fill_type == "solid" else None
    if prop == "font_color":
        return _rgb(cell.font.color) if cell.font is not None and cell.font.color is not None else None
    font_props = {"font_bold": "b", "font_italic": "i", "font_name": "name", "font_size": "sz", "font_underline": "u",
                  "font_strike": "strike"}
    if prop in font_props:
        value = getattr(cell.font, font_props[prop], None)
        return bool(value) if prop in ("font_bold", "font_italic", "font_strike") else value
    if prop == "number_format":
        return cell.number_format
    if prop == "horizontal_alignment":
        return cell.alignment.horizontal
    raise ValueError(f"unknown cell property '{prop}'")


def _rgb(color: Any) -> str | None:
    value = getattr(color, "rgb", None)
    return value if isinstance(value, str) else None


def _pair(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> tuple[Any, Any] | None:
    a = _select(rule.get("sheet_idx0"), result, expected)
    b = _select(rule.get("sheet_idx1"), result, expected)
    return None if a is None or b is None else (a, b)


def _rule_sheet_name(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    return expected is not None and result.wb.sheetnames == expected.wb.sheetnames


def _rule_sheet_data(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    pair = _pair(rule, result, expected)
    ignore_case = bool(rule.get("ignore_case", False))
    return pair is not None and _grids_equal(_grid(pair[0][1], ignore_case), _grid(pair[1][1], ignore_case))


def _csv_rows(book: _Book, ws: Any, ignore_case: bool) -> list[list[str]] | None:
    path = book.path.with_name(f"{book.path.stem}-{ws.title}.csv")
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        rows = [[c.lower() if ignore_case else c for c in row] for row in csv.reader(handle)]
    while rows and not any(rows[-1]):
        rows.pop()
    return rows


def _rule_sheet_print(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    """Compare the displayed text, i.e. the per-sheet CSV export (`<stem>-<sheet>.csv`) next to each workbook."""
    pair = _pair(rule, result, expected)
    if pair is None:
        return False
    ignore_case = bool(rule.get("ignore_case", False))
    a, b = _csv_rows(*pair[0], ignore_case), _csv_rows(*pair[1], ignore_case)
    return a is not None and a == b


def _rule_check_cell(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    selected = _select(rule.get("sheet_idx", 0), result, expected)
    if selected is None:
        return False
    cell = selected[1][rule["coordinate"]]
    return all(match_rule(cell_prop(cell, prop), check) for prop, check in rule.get("props", {}).items())


def _used_coordinates(ws_a: Any, ws_b: Any) -> list[tuple[int, int]]:
    rows = max(ws_a.max_row, ws_b.max_row)
    cols = max(ws_a.max_column, ws_b.max_column)
    return [(r, c) for r in range(1, rows + 1) for c in range(1, cols + 1)]


def _rule_style(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    pair = _pair(rule, result, expected)
    if pair is None:
        return False
    ws_a, ws_b = pair[0][1], pair[1][1]
    props = as_list(rule.get("props"))
    for r, c in _used_coordinates(ws_a, ws_b):
        a, b = ws_a.cell(row=r, column=c), ws_b.cell(row=r, column=c)
        if any(cell_prop(a, p) != cell_prop(b, p) for p in props):
            return False
    return True


def _rule_freeze(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    pair = _pair(rule, result, expected)
    return pair is not None and pair[0][1].freeze_panes == pair[1][1].freeze_panes


def _rule_zoom(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    selected = _select(rule.get("sheet_idx", 0), result, expected)
    if selected is None:
        return False
    zoom = selected[1].sheet_view.zoomScale or 100
    return match_rule(zoom, {"method": rule.get("method", "eq"), "ref": rule.get("ref")})


def _rule_row_props(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    pair = _pair(rule, result, expected)
    if pair is None:
        return False
    ws_a, ws_b = pair[0][1], pair[1][1]
    for row in range(1, max(ws_a.max_row, ws_b.max_row) + 1):
        for prop in as_list(rule.get("props")):
            if getattr(ws_a.row_dimensions[row], prop, None) != getattr(ws_b.row_dimensions[row], prop, None):
                return False
    return True


_MAX_RANGE_ROWS = 5000


def _range_cells(ref: str) -> set[tuple[int, int]]:
    """Cells of a space-separated range list; whole-column ranges are capped at 5000 rows."""
    from openpyxl.utils.cell import range_boundaries

    cells: set[tuple[int, int]] = set()
    for part in str(ref).split():
        min_col, min_row, max_col, max_row = range_boundaries(part)
        max_row = min(max_row, min_row + _MAX_RANGE_ROWS)
        cells.update((c, r) for c in range(min_col, max_col + 1) for r in range(min_row, max_row + 1))
    return cells


def _spreadsheet_range(sqref: str, ref: Any) -> bool:
    """`ref` is [smallest, largest]: the validation must cover the first range and stay inside the second."""
    refs = as_list(ref)
    have = _range_cells(sqref)
    return _range_cells(refs[0]) <= have and (len(refs) < 2 or have <= _range_cells(refs[-1]))


def _rule_data_validation(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    selected = _select(rule.get("sheet_idx", 0), result, expected)
    if selected is None:
        return False
    validations = list(selected[1].data_validations.dataValidation)

    def fits(dv: Any, props: Mapping[str, Any]) -> bool:
        for name, check in props.items():
            if name == "ranges":
                if not _spreadsheet_range(str(dv.sqref), check.get("ref")):
                    return False
            elif not match_rule(getattr(dv, name, None), check):
                return False
        return True

    return all(any(fits(dv, props) for dv in validations) for props in as_list(rule.get("dv_props")))


def _parts_rule(kind: str) -> Callable[[Mapping[str, Any], _Book, _Book | None], bool]:
    def check(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
        pair = _pair(rule, result, expected)
        if pair is None:
            return False
        props = as_list(rule.get("chart_props" if kind == "charts" else "pivot_props"))
        found = []
        for book, ws in pair:
            parts = XlsxParts(book.path)
            try:
                items = getattr(parts, kind)(ws.title)
            finally:
                parts.close()
            found.append([{p: item.get(p) for p in props} for item in items])
        return bool(found[1]) and found[0] == found[1]

    return check


def _fuzzy_cell(a: Any, b: Any, spec: Mapping[str, Any]) -> bool:
    def prep(value: Any) -> str:
        text = "" if value is None else str(value)
        for old, new in spec.get("normalization", []):
            text = text.replace(old, new)
        text = text.lstrip(spec.get("trim_leadings", "")) if spec.get("trim_leadings") else text
        text = text.rstrip(spec.get("trim_trailings", "")) if spec.get("trim_trailings") else text
        for ch in spec.get("ignore_chars", ""):
            text = text.replace(ch, "")
        return text.lower() if spec.get("ignore_case") else text

    got, want = prep(a), prep(b)
    kind = spec.get("type", "exact_match")
    if kind == "exact_match":
        return got == want
    if kind == "includes":
        return want in got
    if kind == "fuzzy_match":
        return difflib.SequenceMatcher(None, got, want).ratio() * 100 >= float(spec.get("threshold", 85))
    raise ValueError(f"unknown sheet_fuzzy rule type '{kind}'")


def _rule_sheet_fuzzy(rule: Mapping[str, Any], result: _Book, expected: _Book | None) -> bool:
    """Per-range cell rules: `exact_match`, `includes` (expected text inside result text), `fuzzy_match`
    (difflib ratio x 100 >= threshold), after normalization / trimming / ignored characters."""
    pair = _pair(rule, result, expected)
    if pair is None:
        return False
    ws_a, ws_b = pair[0][1], pair[1][1]
    for spec in rule.get("rules", []):
        for ref in as_list(spec.get("range")):
            for row_a, row_b in zip(ws_a[ref], ws_b[ref]):
                if not all(_fuzzy_cell(x.value, y.value, spec) for x, y in zip(row_a, row_b)):
                    return False
    return True


_RULES: dict[str, Callable[[Mapping[str, Any], _Book, _Book | None], bool]] = {
    "sheet_name": _rule_sheet_name,
    "sheet_data": _rule_sheet_data,
    "sheet_print": _rule_sheet_print,
    "check_cell": _rule_check_cell,
    "style": _rule_style,
    "freeze": _rule_freeze,
    "zoom": _rule_zoom,
    "row_props": _rule_row_props,
    "data_validation": _rule_data_validation,
    "chart": _parts_rule("charts"),
    "pivot_table": _parts_rule("pivots"),
    "sheet_fuzzy": _rule_sheet_fuzzy,
}


def compare_table(result: Any, expected: Any = None, rules: list[Mapping[str, Any]] | None = None, **_: Any) -> float:
    """1 iff every rule in `rules` holds; with no rules, all sheets' data must match. Unreadable files score 0."""
    if result is None or not Path(result).is_file():
        return 0.0
    try:
        book = _Book(result)
        gold = _Book(expected) if expected is not None else None
    except Exception:  # noqa: BLE001 - any unreadable workbook is simply a failed result
        return 0.0
    if not rules:
        if gold is None:
            return 0.0
        rules = [{"type": "sheet_name"}] + [
            {"type": "sheet_data", "sheet_idx0": f"RI{i}", "sheet_idx1": f"EI{i}"} for i in range(len(gold.wb.worksheets))
        ]
    for rule in rules:
        kind = rule.get("type")
        if kind not in _RULES:
            raise ValueError(f"compare_table: unknown rule type '{kind}'")
        if not _RULES[kind](rule, book, gold):
            return 0.0
    return 1.0


def compare_conference_city_in_order(result: Any, expected: Any = None, **_: Any) -> float:
    """Cities filled in the last used column (rows 2..) match `rules.expected` in order; an entry may be a
    list of accepted spellings, and a cell passes when it contains one of them (case-insensitive)."""
    if result is None or not Path(result).is_file():
        return 0.0
    ws = _Book(result).wb.worksheets[0]
    grid = _grid(ws)
    want = as_list(expected.get("expected") if isinstance(expected, Mapping) else expected)
    cells = [str(row[-1]) for row in grid[1:]] if grid else []
    if len(cells) < len(want):
        return 0.0
    return score(all(any(str(alt).lower() in cell.lower() for alt in as_list(w)) for cell, w in zip(cells, want)))


METRICS = {
    "compare_table": compare_table,
    "compare_conference_city_in_order": compare_conference_city_in_order,
}

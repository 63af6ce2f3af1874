"""compare_table rules and the other spreadsheet metrics on workbooks generated with openpyxl."""

from __future__ import annotations

from pathlib import Path

import pytest
from osworld_testfiles import add_pivot

openpyxl = pytest.importorskip("openpyxl")
from openpyxl.chart import BarChart, Reference  # noqa: E402
from openpyxl.styles import Font, PatternFill  # noqa: E402
from openpyxl.worksheet.datavalidation import DataValidation  # noqa: E402

from qitos.benchmark.osworld.metrics.table import compare_conference_city_in_order, compare_table  # noqa: E402

ROWS = [["Name", "Score"], ["ann", 1], ["bob", 2.5]]


def book(path: Path, rows=ROWS, title: str = "Sheet1", extra=None) -> str:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = title
    for row in rows:
        ws.append(row)
    if extra:
        extra(wb, ws)
    wb.save(path)
    return str(path)


def test_default_rules_compare_all_sheet_data(tmp_path: Path) -> None:
    a = book(tmp_path / "a.xlsx")
    assert compare_table(a, book(tmp_path / "b.xlsx", [["Name", "Score"], ["ann", 1.0], ["bob", 2.5]])) == 1.0
    assert compare_table(a, book(tmp_path / "c.xlsx", [["Name", "Score"], ["ann", 1], ["bob", 3]])) == 0.0
    assert compare_table(str(tmp_path / "missing.xlsx"), a) == 0.0


def test_sheet_data_with_selectors_and_case(tmp_path: Path) -> None:
    a = book(tmp_path / "a.xlsx")
    b = book(tmp_path / "b.xlsx", [["NAME", "Score"], ["ANN", 1], ["BOB", 2.5]], title="Gold")
    rule = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(a, b, rules=[rule]) == 0.0
    assert compare_table(a, b, rules=[{**rule, "ignore_case": True}]) == 1.0
    assert compare_table(a, b, rules=[{"type": "sheet_data", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENGold", "ignore_case": True}]) == 1.0
    assert compare_table(a, b, rules=[{"type": "sheet_data", "sheet_idx0": "RNNope", "sheet_idx1": "EI0"}]) == 0.0


def test_sheet_name(tmp_path: Path) -> None:
    a = book(tmp_path / "a.xlsx")
    assert compare_table(a, book(tmp_path / "b.xlsx"), rules=[{"type": "sheet_name"}]) == 1.0
    assert compare_table(a, book(tmp_path / "c.xlsx", title="Other"), rules=[{"type": "sheet_name"}]) == 0.0


def test_sheet_print_reads_csv_exports(tmp_path: Path) -> None:
    a, b = book(tmp_path / "res.xlsx"), book(tmp_path / "gold.xlsx")
    (tmp_path / "res-Sheet1.csv").write_text("Name,Score\nann,1.00\n")
    (tmp_path / "gold-Sheet1.csv").write_text("Name,Score\nANN,1.00\n")
    rule = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
    assert compare_table(a, b, rules=[rule]) == 0.0
    assert compare_table(a, b, rules=[{**rule, "ignore_case": True}]) == 1.0


def styled(wb, ws) -> None:
    ws["A1"].fill = PatternFill("solid", fgColor="FF0000FF")
    ws["A1"].font = Font(bold=True, color="FFFFFFFF")
    ws.freeze_panes = "B2"
    ws.sheet_view.zoomScale = 150
    ws.row_dimensions[3].hidden = True


def test_check_cell(tmp_path: Path) -> None:
    a = book(tmp_path / "a.xlsx", extra=styled)
    props = {"bgcolor": {"method": "eq", "ref": "FF0000FF"}, "font_color": {"method": "eq", "ref": "FFFFFFFF"},
             "font_bold": {"method": "eq", "ref": True}, "value": {"method": "eq", "ref": "Name"}}
    assert compare_table(a, None, rules=[{"type": "check_cell", "sheet_idx": 0, "coordinate": "A1", "props": props}]) == 1.0
    approx = {"value": {"method": "approx:0.1", "ref": 2.45}}
    assert compare_table(a, None, rules=[{"type": "check_cell", "sheet_idx": "RNSheet1", "coordinate": "B3", "props": approx}]) == 1.0
    wrong = {"value": {"method": "approx:0.01", "ref": 2.45}}
    assert compare_table(a, None, rules=[{"type": "check_cell", "sheet_idx": 0, "coordinate": "B3", "props": wrong}]) == 0.0


def test_style_freeze_zoom_row_props(tmp_path: Path) -> None:
    a, b, plain = book(tmp_path / "a.xlsx", extra=styled), book(tmp_path / "b.xlsx", extra=styled), book(tmp_path / "p.xlsx")
    pair = {"sheet_idx0": 0, "sheet_idx1": "EI0"}
    for rule in ({"type": "style", "props": ["bgcolor", "font_color", "font_bold"]}, {"type": "freeze"},
                 {"type": "row_props", "props": ["hidden"]}):
        assert compare_table(a, b, rules=[{**rule, **pair}]) == 1.0
        assert compare_table(plain, b, rules=[{**rule, **pair}]) == 0.0
    assert compare_table(a, None, rules=[{"type": "zoom", "sheet_idx": 0, "method": "lt", "ref": 260}]) == 1.0
    assert compare_table(a, None, rules=[{"type": "zoom", "sheet_idx": 0, "method": "gt", "ref": 260}]) == 0.0


def test_data_validation(tmp_path: Path) -> None:
    def validation(wb, ws) -> None:
        dv = DataValidation(type="list", formula1='"Pass,Fail,Held"')
        dv.add("D2:D40")
        ws.add_data_validation(dv)

    a = book(tmp_path / "a.xlsx", extra=validation)
    props = {"ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D2:D1048576"]},
             "type": {"method": "eq", "ref": "list"}, "formula1": {"method": "str_set_eq", "ref": ["Pass", "Fail", "Held"]}}
    assert compare_table(a, None, rules=[{"type": "data_validation", "sheet_idx": 0, "dv_props": [props]}]) == 1.0
    narrow = {**props, "ranges": {"method": "spreadsheet_range", "ref": ["D2:D60", "D2:D1048576"]}}
    assert compare_table(a, None, rules=[{"type": "data_validation", "sheet_idx": 0, "dv_props": [narrow]}]) == 0.0


def chart(kind: str, title: str):
    def add(wb, ws) -> None:
        c = BarChart()
        c.type = kind
        c.title = title
        c.add_data(Reference(ws, min_col=2, min_row=1, max_row=3), titles_from_data=True)
        ws.add_chart(c, "E2")

    return add


def test_chart_rule(tmp_path: Path) -> None:
    a = book(tmp_path / "a.xlsx", extra=chart("col", "Sales"))
    b = book(tmp_path / "b.xlsx", extra=chart("col", "Sales"))
    rule = {"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0", "chart_props": ["type", "title", "direction"]}
    assert compare_table(a, b, rules=[rule]) == 1.0
    assert compare_table(book(tmp_path / "c.xlsx", extra=chart("bar", "Sales")), b, rules=[rule]) == 0.0
    assert compare_table(book(tmp_path / "d.xlsx"), b, rules=[rule]) == 0.0


def test_pivot_table_rule(tmp_path: Path) -> None:
    fields = ["Region", "Product", "Sales"]
    a, b, c = (book(tmp_path / f"{n}.xlsx") for n in "abc")
    add_pivot(Path(a), "xl/worksheets/sheet1.xml", fields, rows=[0], cols=[1], data=[2])
    add_pivot(Path(b), "xl/worksheets/sheet1.xml", fields, rows=[0], cols=[1], data=[2])
    add_pivot(Path(c), "xl/worksheets/sheet1.xml", fields, rows=[1], cols=[0], data=[2])
    rule = {"type": "pivot_table", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
            "pivot_props": ["col_fields", "filter", "row_fields", "data_fields"]}
    assert compare_table(a, b, rules=[rule]) == 1.0
    assert compare_table(c, b, rules=[rule]) == 0.0


def test_sheet_fuzzy(tmp_path: Path) -> None:
    a = book(tmp_path / "a.xlsx", [["Addr", "Phone"], ["12 Main Rd", "+1 (555) 123-4567"]])
    b = book(tmp_path / "b.xlsx", [["addr", "Phone"], ["12 Main Road", "5551234567"]])
    rules = [{"range": ["A1:A1"], "type": "exact_match", "ignore_case": True},
             {"range": ["A2:A2"], "type": "fuzzy_match", "threshold": 85, "normalization": [["Rd", "Road"]]},
             {"range": ["B2:B2"], "type": "includes", "trim_leadings": "+ ", "ignore_chars": " ()-"}]
    rule = {"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", "rules": rules}
    assert compare_table(a, b, rules=[rule]) == 1.0
    strict = {**rule, "rules": [{"range": ["A1:B2"], "type": "exact_match"}]}
    assert compare_table(a, b, rules=[strict]) == 0.0


def test_unknown_rule_type_is_an_error(tmp_path: Path) -> None:
    a = book(tmp_path / "a.xlsx")
    with pytest.raises(ValueError, match="unknown rule type 'sparkline'"):
        compare_table(a, a, rules=[{"type": "sparkline"}])


def test_compare_conference_city_in_order(tmp_path: Path) -> None:
    rows = [["Conference", "Year", "City"], ["ICML", 2013, "Atlanta"], ["ICML", 2014, "Montréal, Canada"]]
    path = book(tmp_path / "c.xlsx", rows)
    assert compare_conference_city_in_order(path, {"expected": ["Atlanta", ["Montreal", "Montréal"]]}) == 1.0
    assert compare_conference_city_in_order(path, {"expected": ["Beijing", "Montreal"]}) == 0.0

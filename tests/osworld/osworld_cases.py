"""Real files for OSWorld end-to-end scoring tests: for chosen test_all tasks, the VM state a solved and an unsolved
episode leave (documents, Chrome profile files, VS Code settings), the task inputs that setup downloads and the gold
files (`cloud_file`). Documents are built with openpyxl / python-docx / python-pptx; nothing here decides a score:
upstream's metric does, and the test checks that QitOS's run gives the same number as calling it directly.

Where the state lives: `placed` files sit in the VM before the run (app state the agent left, e.g. Chrome
Preferences); `staged` files are the open document the agent edited but has not saved: the test VM's pyautogui
writes them to disk on ctrl+s, which the task's own postconfig presses, as in the real VM.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOME = "/home/user"

CALC = ["7e429b8d-a3f0-4ed0-9b58-08957d00b127", "abed40dc-063f-4598-8ba5-9fe749c0615d",
        "37608790-6147-45d0-9f20-1137bb35703d", "d681960f-7bc3-4286-9913-a8812ba3261a",
        "51b11269-2ca8-4b2a-9163-f21758420e78", "4172ea6e-6b77-4edb-a9cc-c0014bd1603b",
        "04d9aeaf-7bed-4024-bedb-e10e6f00eb7f", "1d17d234-e39d-4ed7-b46f-4417922a4e7c"]
WRITER = ["adf5e2c3-64c7-4644-b7b6-d2f0167927e7", "d53ff5ee-3b1a-431e-b2be-30ed2673079b",
          "e528b65e-1107-4b8c-8988-490e4fece599", "88fe4b2d-3040-4c70-9a70-546a47764b48",
          "66399b0d-8fda-4618-95c4-bfc6191617e9", "936321ce-5236-426a-9a20-e0e3c5dc536f",
          "0810415c-bde4-4443-9047-d5f70165a697", "ecc2413d-8a48-416e-a3a2-d30106ca36cb",
          "3ef2b351-8a84-4ff2-8724-d86eae9b842e"]
IMPRESS = ["af23762e-2bfd-4a1d-aada-20fa8de9ce07", "9ec204e4-f0a3-42f8-8458-b772a6797cab",
           "a669ef01-ded5-4099-9ea9-25e99b569840", "73c99fb9-f828-43ce-b87a-01dc07faa224",
           "986fc832-6af2-417c-8845-9272b3a1528b", "a097acff-6266-4291-9fbd-137af7ecd439",
           "ce88f674-ab7a-43da-9201-468d38539e4a"]
CHROME = ["bb5e4c0d-f964-439c-97b6-bdb9747de3f4", "2ae9ba84-3a0d-4d4c-8338-3a1478dc5fe3",
          "af630914-714e-4a24-a7bb-f9af687d3b91", "030eeff7-b492-4218-b312-701ec99ee0cc",
          "9656a811-9b5b-4ddf-99c7-5117bcef0626", "99146c54-4f37-4ab8-9327-5f3291665e1e",
          "2ad9387a-65d8-4e33-ad5b-7580065a27ca", "7a5a7856-f1b6-42a4-ade9-1ca81ca0f263",
          "480bcfea-d68f-4aaa-a0a9-2589ef319381", "3299584d-8f11-4457-bf4c-ce98f7600250"]
VS_CODE = ["e2b5e914-ffe1-44d2-8e92-58f8c5d92bb2", "9439a27b-18ae-42d8-9778-5f68f891805e",
           "276cc624-87ea-4f08-ab93-f770e3790175", "9d425400-e9b2-4424-9a4b-d4c7abac4140",
           "70745df8-f2f5-42bd-8074-fbc10334fcc5", "c6bf789c-ba3a-4209-971d-b63abf0ab733",
           "ea98c5d7-3cf9-4f9b-8ad3-366b58e0fcae", "930fdb3b-11a8-46fe-9bac-577332e2640e",
           "0ed39f63-6049-43d4-ba4d-5fa2fe04a951", "ec71221e-ac43-46f9-89b8-ee7d80f7e1c5",
           "eabc805a-bfcf-4460-b250-ac92135819f6", "4e60007a-f5be-4bfc-9723-c39affa0a6d3",
           "0512bb38-d531-4acf-9e7e-0add90816068"]
DOMAINS = {"libreoffice_calc": CALC, "libreoffice_writer": WRITER, "libreoffice_impress": IMPRESS,
           "chrome": CHROME, "vs_code": VS_CODE}


@dataclass
class VMState:
    """One episode's end state, as files keyed by VM path."""

    placed: dict[str, bytes] = field(default_factory=dict)
    staged: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Cases:
    solved: VMState = field(default_factory=VMState)
    unsolved: VMState = field(default_factory=VMState)
    downloads: dict[str, bytes] = field(default_factory=dict)  # setup inputs and gold files, by URL


def _xlsx(rows: list[list[Any]], sheets: tuple[str, ...] = ("Sheet1",), data_sheet: int = 0) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.active.title = sheets[0]
    for name in sheets[1:]:
        book.create_sheet(name)
    target = book.worksheets[data_sheet]
    for row in rows:
        target.append(row)
    for index, sheet in enumerate(book.worksheets):
        if index != data_sheet:
            sheet.append(["note"])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _docx(paragraphs: list[str], *, table: list[list[str]] | None = None, spacing: float | None = None,
          page_break: bool = False, centered: bool = False) -> bytes:
    from docx import Document
    from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_BREAK

    doc = Document()
    for index, text in enumerate(paragraphs):
        paragraph = doc.add_paragraph(text)
        if spacing is not None:
            paragraph.paragraph_format.line_spacing = spacing
        if centered and index == 0:
            paragraph.alignment = WD_ALIGN_PARAGRAPH.CENTER
    if page_break:
        doc.paragraphs[-1].add_run().add_break(WD_BREAK.PAGE)
    if table:
        grid = doc.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


def _pptx(titles: list[str], *, portrait: bool = False) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    if portrait:
        deck.slide_width, deck.slide_height = Inches(7.5), Inches(10)
    for title in titles:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = f"notes on {title}"
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2).encode()


def _task(examples: Path, domain: str, task_id: str) -> dict[str, Any]:
    return json.loads((examples / "examples" / domain / f"{task_id}.json").read_text())


_CTRL_S = re.compile(r"""hotkey\(\s*['"]ctrl['"]\s*,\s*['"]s['"]\s*\)""")


def _saves_on_ctrl_s(task: dict[str, Any]) -> bool:
    """Does the task's postconfig press ctrl+s (save the open document)?"""
    for step in task["evaluator"].get("postconfig", []):
        command = step.get("parameters", {}).get("command", "")
        if any(_CTRL_S.search(part) for part in (command if isinstance(command, list) else [command])):
            return True
    return False


def _download_urls(task: dict[str, Any]) -> dict[str, str]:
    """VM path -> URL of every setup download."""
    return {f["path"]: f["url"] for step in task.get("config", []) if step["type"] == "download"
            for f in step["parameters"]["files"]}


def build_cases(examples: Path) -> Cases:
    """The solved/unsolved end states of every task in DOMAINS, their setup inputs and their gold files."""
    cases = Cases()
    for domain, ids in DOMAINS.items():
        for task_id in ids:
            task = _task(examples, domain, task_id)
            for url in _download_urls(task).values():
                cases.downloads.setdefault(url, b"setup input placeholder\n")
            if domain in ("libreoffice_calc", "libreoffice_writer", "libreoffice_impress") or \
                    task["evaluator"]["func"] == "compare_text_file":
                _document_case(cases, task, domain)
    _chrome_profile(cases)
    _vscode_state(cases)
    return cases


def _document_case(cases: Cases, task: dict[str, Any], domain: str) -> None:
    """Gold = the solved file; unsolved = the input as downloaded (the agent changed nothing)."""
    evaluator = task["evaluator"]
    path = evaluator["result"]["path"]
    func = evaluator["func"]
    name = Path(path).stem
    if func == "compare_table":
        rules = evaluator["options"]["rules"]
        named = any(str(r.get("sheet_idx0", "")).startswith("RN") for r in rules)
        sheets, data_sheet = (("Sheet1", "Sheet2"), 1) if named else (("Sheet1",), 0)
        header = ["Item", "Amount", "Total"]
        solved = _xlsx([header, [name, 3, 6], ["other", 4, 8]], sheets, data_sheet)
        unsolved = _xlsx([header, [name, 3, None], ["other", 4, None]], sheets, data_sheet)
    elif func in ("compare_docx_files", "compare_docx_tables"):
        solved = _docx([f"{name} final text.", "Second paragraph."], table=[["a", "b"], ["1", "2"]])
        unsolved = _docx([f"{name} draft text.", "Second paragraph."], table=[["a", "b"], ["1", "3"]])
    elif func == "compare_line_spacing":
        solved = _docx([f"{name} one.", "Two."], spacing=2.0)
        unsolved = _docx([f"{name} one.", "Two."], spacing=1.0)
    elif func == "contains_page_break":
        solved, unsolved = _docx([name, "after"], page_break=True), _docx([name, "after"])
    elif func == "is_first_line_centered":
        solved, unsolved = _docx([name, "body"], centered=True), _docx([name, "body"])
    elif func == "compare_pptx_files":
        solved, unsolved = _pptx([f"{name} title", "Agenda"]), _pptx([f"{name} draft", "Agenda"])
    elif func == "check_slide_orientation_Portrait":
        solved, unsolved = _pptx([name], portrait=True), _pptx([name])
    elif func == "compare_text_file":
        solved, unsolved = f"{name}: replaced text\n".encode(), f"{name}: original text\n".encode()
    else:
        raise AssertionError(f"no case builder for {func}")
    downloads = _download_urls(task)
    if path in downloads:
        cases.downloads[downloads[path]] = unsolved
    else:
        cases.unsolved.placed[path] = unsolved
    if _saves_on_ctrl_s(task):
        cases.solved.staged[path] = solved
    else:
        cases.solved.placed[path] = solved
    expected = evaluator.get("expected")
    if isinstance(expected, dict) and expected.get("type") == "cloud_file":
        cases.downloads[expected["path"]] = solved


def _chrome_profile(cases: Cases) -> None:
    """One Chrome profile that satisfies every chosen Chrome task, and a fresh-looking one that satisfies none."""
    prefs = f"{HOME}/.config/google-chrome/Default/Preferences"
    bookmarks = f"{HOME}/.config/google-chrome/Default/Bookmarks"
    local_state = f"{HOME}/.config/google-chrome/Local State"
    cases.solved.placed[prefs] = _json({
        "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}},
        "profile": {"name": "Thomas", "default_content_setting_values": {"cookies": 4}},
        "webkit": {"webprefs": {"default_font_size": 20, "default_fixed_font_size": 16, "minimum_font_size": 0}},
        "enable_do_not_track": True, "safebrowsing": {"enhanced": True},
    })
    cases.unsolved.placed[prefs] = _json({"profile": {"name": "Person 1"}, "session": {"restore_on_startup": 4}})
    cases.solved.placed[bookmarks] = _json({"roots": {"bookmark_bar": {"children": [
        {"type": "folder", "name": "Favorites", "children": []},
        {"type": "url", "name": "Transformer", "url": "https://jalammar.github.io/illustrated-transformer/"}]}}})
    cases.unsolved.placed[bookmarks] = _json({"roots": {"bookmark_bar": {"children": []}}})
    cases.solved.placed[local_state] = _json({"browser": {"enabled_labs_experiments": [
        "chrome-refresh-2023@1", "chrome-webui-refresh-2023@1"]}})
    cases.unsolved.placed[local_state] = _json({"browser": {}})


def _vscode_state(cases: Cases) -> None:
    """VS Code settings and keybindings that satisfy every chosen task, and the installed extensions, which the
    test VM's `code --list-extensions` stand-in prints."""
    settings = f"{HOME}/.config/Code/User/settings.json"
    keybindings = f"{HOME}/.config/Code/User/keybindings.json"
    cases.solved.placed[settings] = _json({
        "python.analysis.diagnosticSeverityOverrides": {"reportMissingImports": "none"},
        "debug.focusEditorOnBreak": False, "editor.wordWrapColumn": 50, "workbench.editor.wrapTabs": True,
        "files.autoSave": "afterDelay", "files.autoSaveDelay": 500, "files.exclude": {"**/__pycache__": True},
    })
    cases.unsolved.placed[settings] = _json({"editor.fontSize": 14})
    cases.solved.placed[keybindings] = _json([
        {"key": "ctrl+f", "command": "-list.find", "when": "listFocus && listSupportsFind"},
        {"key": "ctrl+j", "command": "workbench.action.focusActiveEditorGroup", "when": "terminalFocus"}])
    cases.unsolved.placed[keybindings] = _json([])
    extensions = f"{HOME}/.vscode/extensions.txt"
    cases.solved.placed[extensions] = b"ms-python.python\nnjpwerner.autodocstring\nundefined_publisher.test\n"
    cases.unsolved.placed[extensions] = b"ms-vscode.cpptools\n"

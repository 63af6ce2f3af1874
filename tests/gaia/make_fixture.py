"""A GAIA-shaped dataset written at test time, with a scripted solution for every question.

`build_gaia_fixture(root)` writes `<root>/2023/validation/metadata.jsonl` (15 invented
questions over levels 1-3, one attachment of every supported type) and a small unlabeled
`<root>/2023/test/metadata.jsonl`. `SCRIPTED_SOLUTIONS[task_id]` lists the tool calls a
scripted agent makes (`{"tool", "arguments", "expect"}`; `expect` is a substring the tool's
output must contain, for tests, and may be ignored) and ends with `{"final": answer}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

try:  # imported as part of the tests.gaia package, or as a top-level module
    from . import fixture_files as ff
except ImportError:  # pragma: no cover
    import fixture_files as ff  # type: ignore[no-redef]

Step = dict[str, Any]


def _id(n: int) -> str:
    return f"00000000-9a1a-4000-8000-{n:012d}"


def _read(path: str, expect: str) -> Step:
    return {"tool": "read_file", "arguments": {"path": path}, "expect": expect}


def _python(code: str, expect: str) -> Step:
    return {"tool": "run_python", "arguments": {"code": code}, "expect": expect}


# (task_id, level, question, file_name, final answer, steps)
QUESTIONS: list[tuple[str, int, str, str, str, list[Step]]] = [
    (_id(1), 1, "According to the attached shopping list, how many apples must be bought in total?",
     "shopping_list.txt", "7", [_read("shopping_list.txt", "apples: 4"), {"final": "7"}]),
    (_id(2), 1, "Which planet in the attached survey table has the most moons?",
     "moons.md", "Borealis", [_read("moons.md", "| Borealis | 12 |"), {"final": "Borealis"}]),
    (_id(3), 2, "What is the total tonnage of barley over all months in the attached harvest log?",
     "harvest.csv", "1250",
     [_python("import csv\nrows = csv.DictReader(open('harvest.csv'))\n"
              "print(sum(float(r['tonnes']) for r in rows if r['crop'] == 'barley'))", "1250.0"),
      {"final": "1250"}]),
    (_id(4), 1, "Which item in the attached inventory is the most expensive? Give its name.",
     "inventory.json", "Brass telescope",
     [_read("inventory.json", '"price": 310.0'), {"final": "brass telescope"}]),
    (_id(5), 2, "In which year was the author described in the attached linked-data file born?",
     "author.jsonld", "1897", [_read("author.jsonld", '"birthDate": "1897-03-14"'), {"final": "1897"}]),
    (_id(6), 2, "Which employee in the attached payroll sheet has the highest salary?",
     "payroll.xlsx", "Mira Solberg", [_read("payroll.xlsx", "Mira Solberg | Research | 7150"),
                                      {"final": "Mira Solberg"}]),
    (_id(7), 3, "How many plots in the attached garden plan are shaded green?",
     "garden.xlsx", "4", [_read("garden.xlsx", "B2=FF00B050"), {"final": "4"}]),
    (_id(8), 2, "According to the table in the attached gazetteer, what is the capital of Valdoria?",
     "gazetteer.docx", "Port Emmer", [_read("gazetteer.docx", "Valdoria | Port Emmer"), {"final": "Port Emmer"}]),
    (_id(9), 2, "On which slide of the attached presentation is the kangaroo mentioned?",
     "tour.pptx", "3", [_read("tour.pptx", "## Slide 3"), {"final": "3"}]),
    (_id(10), 2, "What is the grand total of the attached invoice, in dollars?",
     "invoice.pdf", "1234.5", [_read("invoice.pdf", "Grand total: $1,234.50"), {"final": "$1,234.50"}]),
    (_id(11), 3, "How many of the files in the attached archive mention a lighthouse?",
     "letters.zip", "2",
     [{"tool": "extract_zip", "arguments": {"path": "letters.zip"}, "expect": "extracted 4 file(s)"},
      _read("letters/letters/to_ada.txt", "lighthouse"),
      _read("letters/letters/to_bram.txt", "harbour"),
      _read("letters/letters/to_cleo.txt", "Lighthouse"),
      _read("letters/notes/summary.md", "ferry"),
      {"final": "2"}]),
    (_id(12), 1, "What camera model is recorded in the metadata of the attached photo?",
     "photo.jpg", "QitCam 3000", [_read("photo.jpg", "Model: QitCam 3000"), {"final": "QitCam 3000"}]),
    (_id(13), 1, "How many pixels wide is the attached diagram?",
     "diagram.png", "320", [_read("diagram.png", "320x200 pixels"), {"final": "320"}]),
    (_id(14), 3, "What is the sum of the first 100 prime numbers?", "", "24133",
     [_python("primes = []\nn = 2\nwhile len(primes) < 100:\n"
              "    if all(n % p for p in primes):\n        primes.append(n)\n    n += 1\nprint(sum(primes))", "24133"),
      {"final": "24133"}]),
    (_id(15), 3, "List, in alphabetical order and separated by commas, the towns in the attached census "
                 "with more than 500000 inhabitants.",
     "census.csv", "Amberfield, Dunmore, Kestrel Bay",
     [_python("import csv\nrows = csv.DictReader(open('census.csv'))\n"
              "print(', '.join(sorted(r['town'] for r in rows if int(r['population']) > 500000)))",
              "Amberfield, Dunmore, Kestrel Bay"),
      {"final": "Amberfield, Dunmore, Kestrel Bay"}]),
]

SCRIPTED_SOLUTIONS: dict[str, list[Step]] = {task_id: steps for task_id, *_, steps in QUESTIONS}

TEST_QUESTIONS: list[tuple[str, int, str, str]] = [
    (_id(101), 1, "How many ferries are listed in the attached timetable?", "timetable.txt"),
    (_id(102), 2, "What is 17 multiplied by 23?", ""),
    (_id(103), 3, "Name the longest river mentioned in the attached notes.", "rivers.md"),
]


def _write_validation_attachments(folder: Path) -> None:
    ff.write_text(folder / "shopping_list.txt",
                  "Weekend shopping\n- bread: 2 loaves\n- apples: 4\n- milk: 1 litre\n- more apples: 3 (for the pie)\n")
    ff.write_text(folder / "moons.md",
                  "# Survey of the Lyra system (invented)\n\n| Planet | Moons |\n| --- | --- |\n"
                  "| Aster | 3 |\n| Borealis | 12 |\n| Cindra | 7 |\n")
    harvest = ["month,crop,tonnes", "January,barley,400", "January,oats,120", "February,barley,350.5",
               "March,barley,499.5", "March,rye,80"]
    ff.write_text(folder / "harvest.csv", "\n".join(harvest) + "\n")
    ff.write_json(folder / "inventory.json", {"items": [
        {"name": "Oak chest", "price": 120.0}, {"name": "Brass telescope", "price": 310.0},
        {"name": "Wool blanket", "price": 45.5}]})
    ff.write_json(folder / "author.jsonld", {
        "@context": "https://schema.org", "@type": "Person", "name": "Orla Venn",
        "birthDate": "1897-03-14", "jobTitle": "Cartographer"})
    ff.write_xlsx(folder / "payroll.xlsx", [
        ["Name", "Department", "Salary"], ["Ivo Marsh", "Sales", 5200], ["Mira Solberg", "Research", 7150],
        ["Tomas Greve", "Research", 6400], ["Total", None, "=SUM(C2:C4)"]], title="Payroll")
    plan = [["Row", "West", "Middle", "East"], ["1", "beans", "kale", "leeks"], ["2", "peas", "onions", "chard"],
            ["3", "herbs", "beets", "garlic"]]
    ff.write_xlsx(folder / "garden.xlsx", plan, title="Plan",
                  fills={"B2": "FF00B050", "D2": "FF00B050", "C3": "FFFF0000", "B4": "FF00B050", "D4": "FF00B050"})
    ff.write_docx(folder / "gazetteer.docx", "Gazetteer of invented countries",
                  ["The table lists each country with its capital."],
                  [["Country", "Capital"], ["Ardenia", "Lowmere"], ["Valdoria", "Port Emmer"], ["Zell", "Quarry Hill"]])
    ff.write_pptx(folder / "tour.pptx", [
        ("Day one", "Arrival and the botanical garden"), ("Day two", "Museum of clocks"),
        ("Day three", "Wildlife park: we met a kangaroo"), ("Day four", "Departure")],
        notes={1: "Remember the tickets"})
    ff.write_pdf(folder / "invoice.pdf", [
        ["Invoice 2023-117", "Customer: Harbour Lights Ltd", "Item: lamp oil, 10 barrels"],
        ["Subtotal: $1,100.00", "Delivery: $134.50", "Grand total: $1,234.50"]])
    ff.write_zip(folder / "letters.zip", {
        "letters/to_ada.txt": "Dear Ada, the lighthouse keeper sends his regards.",
        "letters/to_bram.txt": "Dear Bram, the harbour is frozen again.",
        "letters/to_cleo.txt": "Dear Cleo, we painted the Lighthouse red.",
        "notes/summary.md": "# Notes\nThe ferry runs twice a week."})
    ff.write_image(folder / "photo.jpg", (64, 48), exif={0x010F: "Qit Optics", 0x0110: "QitCam 3000",
                                                         0x0132: "2023:05:01 10:00:00"},
                   gps={1: "N", 2: (59.0, 19.0, 30.0), 3: "E", 4: (18.0, 4.0, 0.0)})
    ff.write_image(folder / "diagram.png", (320, 200), exif={0x013B: "R. Lindqvist"}, colour=(250, 250, 250))
    census = ["town,population", "Amberfield,812000", "Brackwater,120500", "Dunmore,500001", "Kestrel Bay,1200000",
              "Millbrook,500000"]
    ff.write_text(folder / "census.csv", "\n".join(census) + "\n")


def _metadata(steps: list[Step]) -> dict[str, str]:
    tools = sorted({s["tool"] for s in steps if "tool" in s})
    return {"Steps": "\n".join(f"{i}. call {s['tool']}" for i, s in enumerate(steps, 1) if "tool" in s),
            "Number of steps": str(len(steps)), "How long did this take?": "1 minute",
            "Tools": "\n".join(f"{i}. {t}" for i, t in enumerate(tools, 1)), "Number of tools": str(len(tools))}


def _write_rows(folder: Path, rows: list[dict[str, Any]], fmt: str) -> None:
    if fmt == "jsonl":
        with (folder / "metadata.jsonl").open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), folder / "metadata.parquet")


def build_gaia_fixture(root: Path, *, fmt: Literal["jsonl", "parquet"] = "jsonl") -> Path:
    """Write the fixture under `root` (hub layout) and return `root`."""
    validation = root / "2023" / "validation"
    test = root / "2023" / "test"
    validation.mkdir(parents=True, exist_ok=True)
    test.mkdir(parents=True, exist_ok=True)
    _write_validation_attachments(validation)
    rows = [{"task_id": task_id, "Question": question, "Level": str(level), "Final answer": answer,
             "file_name": file_name, "Annotator Metadata": _metadata(steps)}
            for task_id, level, question, file_name, answer, steps in QUESTIONS]
    _write_rows(validation, rows, fmt)
    ff.write_text(test / "timetable.txt", "Ferries: Morning Star, Gull, Northern Light\n")
    ff.write_text(test / "rivers.md", "- Tamber (120 km)\n- Osk (340 km)\n")
    test_rows = [{"task_id": task_id, "Question": question, "Level": str(level), "Final answer": "?",
                  "file_name": file_name} for task_id, level, question, file_name in TEST_QUESTIONS]
    _write_rows(test, test_rows, fmt)
    return root

"""Every built-in family shows its two sides: each module says in its docstring's first line which side it runs on,
and the family's docs page lists every module by side (issue 35, item 3).

Sources are read with `ast`, never imported: the check is about what the files say, and importing a family would
load optional dependencies this test does not need.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = ROOT / "qitos" / "benchmark"
SIDES = ("Agent side", "Scoring side", "Both sides")
SECTION = "## Files, by side"
DOCS = {
    "cybench": "docs/benchmarks/cybench.md",
    "desktop": "docs/benchmarks/desktop-starter.md",
    "gaia": "docs/benchmarks/gaia.md",
    "jsonl": "docs/third-party-benchmarks.md",
    "osworld": "docs/benchmarks/osworld.md",
    "tau_bench": "docs/benchmarks/tau-bench.md",
}
FAMILIES = sorted(p.parent.name for p in BENCHMARK.glob("*/adapter.py"))


def _modules(family: str) -> list[Path]:
    """The family's modules (subpackages included), without the package markers `__init__.py` and `__main__.py`."""
    return sorted(p for p in (BENCHMARK / family).rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def test_the_families_are_found_and_each_has_a_docs_page():
    assert {"desktop", "gaia", "jsonl", "osworld", "tau_bench"} <= set(FAMILIES)
    assert set(FAMILIES) <= set(DOCS), f"a family without a docs page in DOCS: {sorted(set(FAMILIES) - set(DOCS))}"


@pytest.mark.parametrize("family", FAMILIES)
def test_each_module_docstring_names_its_side(family: str):
    wrong = []
    for path in _modules(family):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True) or ""
        first = doc.strip().splitlines()[0] if doc.strip() else "<no docstring>"
        if not first.startswith(SIDES):
            wrong.append(f"{path.relative_to(ROOT)}: {first[:80]!r}")
    assert not wrong, (f"the first line of a module docstring must start with one of {SIDES}:\n  "
                       + "\n  ".join(wrong))


def _section(text: str) -> str | None:
    """The text of the page's "## Files, by side..." section, up to the next level-2 heading."""
    match = re.search(rf"^{re.escape(SECTION)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    return match.group(1) if match else None


@pytest.mark.parametrize("family", FAMILIES)
def test_the_docs_page_lists_every_module_by_side(family: str):
    page = ROOT / DOCS[family]
    section = _section(page.read_text(encoding="utf-8"))
    assert section is not None, f"{DOCS[family]} has no '{SECTION}' section"
    for side in ("Agent side:", "Scoring side:", "Both:"):
        assert re.search(rf"^{side}$", section, re.MULTILINE), f"{DOCS[family]}: '{SECTION}' has no '{side}' list"
    named = set(re.findall(r"`([\w/]+\.py)`", section))
    missing = [p.relative_to(BENCHMARK / family).as_posix() for p in _modules(family)]
    missing = [m for m in missing if m not in named]
    assert not missing, f"{DOCS[family]}: '{SECTION}' does not name {missing}"
    stale = sorted(n for n in named if not n.startswith("qitos/") and not (BENCHMARK / family / n).is_file())
    assert not stale, f"{DOCS[family]}: '{SECTION}' names files that do not exist in the family: {stale}"


def test_the_section_parser_reads_only_its_own_section():
    text = f"# T\n\n{SECTION}\n\nAgent side:\n- `a.py`: x\n\n## Example\n\n- `b.py`\n"
    section = _section(text)
    assert section is not None and "`a.py`" in section and "`b.py`" not in section
    assert _section("# T\n\n## Other\n\n- `a.py`\n") is None

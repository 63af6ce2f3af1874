"""Files QitOS writes that are not results JSONL, recognised where a results file is expected.

`qit bench eval` and `qit bench export --input` read the JSONL that `qit bench run` writes, one row per
line. Given an export instead (the tau-bench results JSON, a CSV or Markdown table, a GAIA submission, a
run's HTML or JSON), reading it line by line reports every line as unreadable and counts no row; this
module names the format and the command that reads it, from the file's first bytes, so the user gets
one line and exit 2 instead. The CSV export's columns are defined here too, as the header that names it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from qitos.benchmark.errors import BenchmarkUsageError

SNIFF_BYTES = 1 << 16
_ROWS = "give the results JSONL `qit bench run` writes (one row object per line)"
COLUMNS = ["task_id", "benchmark", "split", "subset", "trial", "model", "recipe", "run_spec_ref", "success", "score",
           "stop_reason", "steps", "latency_seconds", "total_tokens", "cost", "prediction", "trace_run_dir",
           "do_nothing_success"]  # `--format csv`; do_nothing_success: would an agent doing nothing succeed (floor.py)


@dataclass(frozen=True)
class ForeignFormat:
    name: str  # what the file is
    reader: str  # the command that reads it (or what to give instead)


def recognise(path: Path) -> ForeignFormat | None:
    """The export format of the file at `path`, or None when it may be a results JSONL."""
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if not text or text.startswith('{"task_id":'):  # how every row QitOS writes begins
        return _gaia_submission(text)
    first = text.split("\n", 1)[0].strip()
    lowered = text[:200].lower()
    if lowered.startswith("<!doctype html") or lowered.startswith("<html"):
        return ForeignFormat("an HTML page (`qit bench export --html` or `qita export`)", "open it in a browser")
    if text.startswith("["):
        return _json_list(path)
    if first.replace(" ", "").startswith("|benchmark|split|"):
        return ForeignFormat("a Markdown table (`qit bench export --format md`)",
                             "it is a report: give the results JSONL it was made from")
    if first == ",".join(COLUMNS):
        return ForeignFormat("a CSV export (`qit bench export --format csv`)",
                             "give the results JSONL it was made from (results/*.jsonl)")
    if first == "{":  # an indented JSON document: no row spans several lines
        if _run_json(path):
            return ForeignFormat("a run exported as JSON (`qit bench export --run DIR --json`)",
                                 "`qit bench replay --run DIR` shows the run it was made from")
        return ForeignFormat("a JSON document over several lines, not JSON lines", _ROWS)
    return _tasks_file(path, first)


def _tasks_file(path: Path, first: str) -> ForeignFormat | None:
    """A `--benchmark jsonl` tasks file ({id, question, answer} lines) given where results are expected."""
    try:
        row = json.loads(first)
    except ValueError:
        return None
    if isinstance(row, dict) and "task_id" not in row and "question" in row:
        return ForeignFormat("a tasks file ({id, question, answer} lines)",
                             f"run it with `qit bench run -b jsonl --root {path} --output results.jsonl`, then "
                             "evaluate results.jsonl")
    return None


def _gaia_submission(text: str) -> ForeignFormat | None:
    """GAIA leaderboard lines ({task_id, model_answer[, reasoning_trace]}) look like rows at first."""
    try:
        first = json.loads(text.split("\n", 1)[0])
    except ValueError:
        return None
    if isinstance(first, dict) and "model_answer" in first and first.keys() <= {"task_id", "model_answer",
                                                                                  "reasoning_trace"}:
        return ForeignFormat("a GAIA submission (`qit bench export --format gaia-submission`)",
                             "submit it to the GAIA leaderboard; give the results JSONL it was made from")
    return None


def _json_list(path: Path) -> ForeignFormat:
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        items = None
    if isinstance(items, list) and items and all(isinstance(i, dict) and {"task_id", "reward", "trial"} <= i.keys()
                                                 for i in items[:50]):
        domains = {(i.get("info") or {}).get("domain") if isinstance(i.get("info"), dict) else None for i in items}
        subset = domains.pop() if len(domains) == 1 and None not in domains else "retail|airline"
        return ForeignFormat("a tau-bench results file (upstream run.py's JSON, or `qit bench export --format "
                             "tau-bench`)", f"`qit bench import --format tau-bench {path} --subset {subset}` "
                             "turns it into rows `qit bench eval` reads")
    return ForeignFormat("a JSON list, not JSON lines", _ROWS)


def _run_json(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and {"manifest", "steps", "events"} <= doc.keys()


def require_file(path: Path, flag: str = "--input", what: str = "a results file") -> None:
    """`path` must be an existing file: a folder is named as a folder (with the JSONL files in it), not as missing."""
    if path.is_dir():
        found = sorted(p.name for p in path.glob("*.jsonl"))[:3]
        hint = f" (it holds {', '.join(found)})" if found else ""
        raise BenchmarkUsageError(f"{flag} {path}: is a directory, not {what}{hint}; give the file(s), e.g. "
                                  f"{flag} {path / (found[0] if found else 'results.jsonl')}")
    if not path.is_file():
        raise BenchmarkUsageError(f"{flag} {path}: no such file")


def refuse_foreign_format(path: Path, flag: str = "--input") -> None:
    """Raise the one-line usage error when `path` is an export, not a results JSONL."""
    found = recognise(path)
    if found is not None:
        raise BenchmarkUsageError(f"{flag} {path}: this is {found.name}, not a results JSONL; {found.reader}")

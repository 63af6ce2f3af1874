"""Exports: one run as JSON, results as CSV, Markdown, or a benchmark's upstream format (a GAIA submission,
Tau-Bench's results JSON) that its adapter writes. Every export is written with secret values scrubbed
(`write_redacted`, also for qita's HTML pages)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from qitos.trace.reader import load_run
from qitos.trace.redact import redact_text

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.results.formats import COLUMNS, refuse_foreign_format, require_file
from qitos.results.rows import RowIssue, iter_rows


def write_redacted(out: Path, text: str) -> Path:
    """Write one export file (its folder made), with every known secret value scrubbed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(redact_text(text), encoding="utf-8")
    return out


def export_run_json(run_dir: Path, out: Path) -> None:
    trace = load_run(run_dir)
    doc = {"manifest": trace.manifest.model_dump(mode="json"),
           "steps": [s.model_dump(mode="json") for s in trace.steps],
           "events": [e.model_dump(mode="json") for e in trace.events],
           "issues": [vars(i) for i in trace.issues]}
    write_redacted(out, json.dumps(doc, ensure_ascii=False, indent=1, default=str))


def _flat(row: dict) -> dict:
    out = {c: row.get(c) for c in COLUMNS}
    out["total_tokens"] = (row.get("token_usage") or {}).get("total_tokens")
    out["do_nothing_success"] = (row.get("metadata") or {}).get("do_nothing_success")
    return out


def export_results(paths: list[Path], fmt: str, issues: list[RowIssue] | None = None) -> str:
    """The results in `fmt`, with every known secret value redacted; lines that cannot be read are left out
    and reported in `issues` (file and line number)."""
    return redact_text(_export_results(paths, fmt, issues))


FORMATS = ("csv", "md", "gaia-submission", "tau-bench", "osworld", "cybench")  # `qit bench export --format`
UPSTREAM = {"gaia-submission": "gaia", "tau-bench": "tau-bench"}  # format -> the benchmark whose adapter writes it


def _export_results(paths: list[Path], fmt: str, issues: list[RowIssue] | None) -> str:
    if fmt not in FORMATS:
        raise BenchmarkUsageError(f"--format '{fmt}' is not known; use {', '.join(FORMATS)}")
    if fmt in ("osworld", "cybench"):
        raise BenchmarkUsageError(f"--format {fmt} writes upstream's results folder, not one text: "
                                  f"qit bench export --input FILE --format {fmt} --output DIR")
    rows = []
    for path in paths:
        require_file(path)
        refuse_foreign_format(path)
    for path in paths:
        rows.extend(iter_rows(path, issues, required=("task_id", "benchmark", "stop_reason")))
    if fmt in UPSTREAM:
        from qitos.benchmark.registry import get_adapter

        return get_adapter(UPSTREAM[fmt]).export_results(fmt, rows, paths)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(_flat(row))
        return buffer.getvalue()
    return _markdown(rows)


def _markdown(rows: list[dict]) -> str:
    """One line per configuration: the rate over every selected task, the do-nothing floor beside it, its coverage
    and the scored-only rate."""
    from qitos.benchmark.metrics import evaluate_rows

    lines = ["| benchmark | split | subset | model | recipe | run_spec | selected | success | rate | 95% CI "
             "| do-nothing floor | coverage | rate (scored) | pass^k | tokens | cost |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for g in evaluate_rows(rows):
        m, k = g["metrics"], g["group"]
        first = next(r for r in rows if r.get("run_spec_ref") == k["run_spec_ref"] and r.get("benchmark") == k["benchmark"])
        ci = m["success_ci95"]
        pk = " ".join(f"{n}:{v:.3f}" for n, v in m["pass_hat_k"].items() if v is not None)
        lines.append(f"| {k['benchmark']} | {k['split']} | {k['subset'] or '-'} | {first.get('model')} | "
                     f"{first.get('recipe')} | {k['run_spec_ref']} | {m['selected']} | {m['successes']}/{m['selected']} | "
                     f"{_num(m['success_rate'])} | {f'[{ci[0]:.3f}, {ci[1]:.3f}]' if ci else '-'} | "
                     f"{_floor(m.get('do_nothing_floor'))} | {m['scored']}/{m['selected']} | "
                     f"{_num(m['scored_success_rate'])} | {pk or '-'} | "
                     f"{m['total_tokens']} | {m['total_cost']} |")
    return "\n".join(lines) + "\n"


def _floor(floor: dict | None) -> str:
    """The do-nothing floor (`qitos.benchmark.floor`): `0.380 (19/50)`, `≥` when some tasks never ran; `-` when
    the benchmark has no rule."""
    if not floor or floor["rate"] is None:
        return "-"
    text = f"{floor['rate']:.3f} ({floor['successes']}/{floor['selected']})"
    return f"≥ {text}, up to {floor['rate_max']:.3f}" if floor["unknown"] else text


def _num(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


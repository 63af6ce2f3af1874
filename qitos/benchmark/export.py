"""Exports: one run as HTML or JSON, results as CSV, Markdown or a GAIA submission."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from qitos.trace.reader import load_run
from qitos.trace.redact import redact_text

from .errors import BenchmarkUsageError
from .results import iter_rows


def export_run_json(run_dir: Path, out: Path) -> None:
    trace = load_run(run_dir)
    doc = {"manifest": trace.manifest.model_dump(mode="json"),
           "steps": [s.model_dump(mode="json") for s in trace.steps],
           "events": [e.model_dump(mode="json") for e in trace.events],
           "issues": [vars(i) for i in trace.issues]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(redact_text(json.dumps(doc, ensure_ascii=False, indent=1, default=str)), encoding="utf-8")


def export_run_html(run_dir: Path, out: Path) -> None:
    from qitos.qita.export import export_run_html as render

    render(run_dir, out)


COLUMNS = ["task_id", "benchmark", "split", "subset", "trial", "model", "success", "score", "stop_reason", "steps",
           "latency_seconds", "total_tokens", "cost", "prediction", "trace_run_dir"]


def _flat(row: dict) -> dict:
    out = {c: row.get(c) for c in COLUMNS}
    out["total_tokens"] = (row.get("token_usage") or {}).get("total_tokens")
    return out


def export_results(paths: list[Path], fmt: str) -> str:
    """The results in `fmt`, with every known secret value redacted."""
    return redact_text(_export_results(paths, fmt))


def _export_results(paths: list[Path], fmt: str) -> str:
    rows = []
    for path in paths:
        if not path.is_file():
            raise BenchmarkUsageError(f"--input {path}: no such file")
        rows.extend(iter_rows(path))
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(_flat(row))
        return buffer.getvalue()
    if fmt == "md":
        from .metrics import evaluate_rows

        groups = evaluate_rows(rows, ["benchmark", "split", "model"])
        lines = ["| benchmark | split | model | tasks | success | rate | 95% CI | pass^k | tokens | cost |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for g in groups:
            m, k = g["metrics"], g["group"]
            ci = m["success_ci95"] or [None, None]
            pk = " ".join(f"{n}:{v:.3f}" for n, v in m["pass_hat_k"].items() if v is not None)
            rate = f"{m['success_rate']:.3f}" if m["success_rate"] is not None else "-"
            ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci[0] is not None else "-"
            lines.append(f"| {k['benchmark']} | {k['split']} | {k['model']} | {m['tasks']} | {m['successes']}/{m['scored']} "
                         f"| {rate} | {ci_text} | {pk or '-'} | {m['total_tokens']} | {m['total_cost']} |")
        return "\n".join(lines) + "\n"
    if fmt == "gaia-submission":
        from qitos.benchmark.gaia.metrics import submission_rows

        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in submission_rows(rows))
    raise BenchmarkUsageError(f"--format '{fmt}' is not known; use csv, md or gaia-submission")

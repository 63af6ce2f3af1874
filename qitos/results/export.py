"""Exports: one run as HTML or JSON, results as CSV, Markdown, a GAIA submission or Tau-Bench's results JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from qitos.trace.reader import load_run
from qitos.trace.redact import redact_text

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.results.formats import refuse_foreign_format, require_file
from qitos.results.rows import RowIssue, iter_rows


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


COLUMNS = ["task_id", "benchmark", "split", "subset", "trial", "model", "recipe", "run_spec_ref", "success", "score",
           "stop_reason", "steps", "latency_seconds", "total_tokens", "cost", "prediction", "trace_run_dir",
           "do_nothing_success"]  # would an agent doing nothing succeed on this task (empty: no rule; floor.py)


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
    if fmt == "tau-bench":
        from qitos.benchmark.tau_bench.interop import export_results as tau_results

        return tau_results(paths)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(_flat(row))
        return buffer.getvalue()
    if fmt == "md":
        return _markdown(rows)
    return _gaia_submission(rows)


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


def _gaia_submission(rows: list[dict]) -> str:
    from qitos.benchmark.gaia.metrics import submission_rows

    others = sorted({str(r.get("benchmark")) for r in rows} - {"gaia"})
    if others:
        raise BenchmarkUsageError(f"--format gaia-submission: the input holds rows of {', '.join(others)}; "
                                  "give only GAIA results files")
    configs = sorted({str(r.get("run_spec_ref")) for r in rows})
    if len(configs) > 1:
        raise BenchmarkUsageError(f"--format gaia-submission: the input mixes {len(configs)} configurations "
                                  f"({', '.join(configs)}); a submission is one agent's answers: give one of them")
    seen: dict[tuple, int] = {}
    for r in rows:
        key = (r["task_id"], r.get("trial", 0))
        seen[key] = seen.get(key, 0) + 1
    dupes = sorted(f"{t} (trial {n})" for (t, n), count in seen.items() if count > 1)
    if dupes:
        raise BenchmarkUsageError(f"--format gaia-submission: duplicate rows for {', '.join(dupes[:5])}"
                                  + (f" and {len(dupes) - 5} more" if len(dupes) > 5 else "")
                                  + "; keep one row per task and trial")
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in submission_rows(rows))

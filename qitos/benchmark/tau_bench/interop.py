"""Scoring side (rows, never in a run): upstream tau-bench results files in (``qit bench import --format tau-bench``).

Upstream's ``run.py`` writes a JSON list with one object per trajectory: ``task_id`` (the task
index), ``reward``, ``info``, ``traj`` (the agent's messages) and ``trial``. Importing turns each
into a QitOS result row (task id ``tau_<domain>_<split>_<index>``, score = reward) and a trace
whose events hold the messages, so ``qit bench eval`` and qita show it next to QitOS runs; a
trajectory whose ``info`` holds an ``error`` (upstream's crashed episode) becomes an ``error`` row
with reward 0, which upstream's metrics also count as 0. Exporting writes that list back from rows
(:mod:`.export`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from qitos.spec.run_spec import RunSpec
from qitos.trace.schema import RunSummary
from qitos.trace.writer import TraceWriter, new_run_id

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.results.rows import BenchmarkRunResult, ResultsFile
from qitos.benchmark.tau_bench.adapter import SUCCESS_TOLERANCE, task_id
from qitos.benchmark.tau_bench.data import DOMAIN_SPLITS


def read_upstream_results(path: Path) -> list[dict[str, Any]]:
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchmarkUsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise BenchmarkUsageError(f"{path}: not JSON ({exc}); expected a tau-bench results file") from None
    if not isinstance(items, list):
        raise BenchmarkUsageError(f"{path}: expected a JSON list of trajectories (upstream's run.py output)")
    for number, item in enumerate(items):
        missing = [k for k in ("task_id", "reward", "trial") if not isinstance(item, dict) or k not in item]
        if missing:
            raise BenchmarkUsageError(f"{path}: trajectory {number} lacks {', '.join(missing)}")
    return items


def import_results(path: Path, domain: str, split: str, output: Path, trace_logdir: Path) -> list[BenchmarkRunResult]:
    """Append one row (and write one trace) per trajectory of upstream's results file `path`."""
    if domain not in DOMAIN_SPLITS or split not in DOMAIN_SPLITS[domain]:
        raise BenchmarkUsageError(f"--subset {domain} --split {split}: not a tau-bench domain/split "
                                  f"({', '.join(f'{d}: {s}' for d, s in DOMAIN_SPLITS.items())})")
    items = read_upstream_results(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    spec = RunSpec(model_name=f"imported:{Path(path).name}", model_family="imported", benchmark_name="tau-bench",
                   benchmark_split=split, benchmark_subset=domain, prompt_protocol="tau-bench upstream run.py (imported)",
                   metadata={"imported_from": str(path), "file_sha256_16": digest})
    results = ResultsFile(Path(output))
    rows = []
    for item in items:
        row = _row(item, domain, split, spec, trace_logdir)
        results.append(row)
        rows.append(row)
    return rows


def _row(item: dict[str, Any], domain: str, split: str, spec: RunSpec, trace_logdir: Path) -> BenchmarkRunResult:
    reward = float(item["reward"])
    info = item.get("info") or {}
    error = info.get("error") if isinstance(info, dict) else None
    traj = item.get("traj") or []
    tid = task_id(domain, split, int(item["task_id"]))
    stop = "error" if error else ("env_terminal" if _ended(info) else "budget_steps")
    writer = TraceWriter(trace_logdir, new_run_id("tau-bench-import", tid, int(item["trial"])), fsync="never")
    writer.update(model_id=spec.model_name, model_family="imported", benchmark_name="tau-bench",
                  benchmark_split=split, prompt_protocol=spec.prompt_protocol,
                  run_spec={**spec.model_dump(mode="json"), "fingerprint": spec.fingerprint()},
                  task={"id": tid, "objective": f"tau-bench {domain} {split} task {item['task_id']} (imported)",
                        "metadata": {"benchmark": "tau-bench", "split": split, "subset": domain}})
    writer.write_manifest()
    for number, message in enumerate(traj):
        writer.event("imported_message", "ACT", {"index": number, "message": message}, step_id=None)
    assistant_turns = sum(1 for m in traj if isinstance(m, dict) and m.get("role") == "assistant")
    summary = RunSummary(stop_reason=stop, steps=assistant_turns,
                         failure_report={"type": "upstream", "message": error} if error else None)
    writer.finalize("failed" if error else "completed", summary, evaluation={"score": reward})
    success = abs(reward - 1.0) <= SUCCESS_TOLERANCE
    return BenchmarkRunResult(
        task_id=tid, benchmark="tau-bench", split=split, subset=domain, trial=int(item["trial"]), model=spec.model_name,
        success=success, score=reward, stop_reason=stop, steps=assistant_turns, trace_run_dir=str(writer.run_dir),
        run_spec_ref=spec.fingerprint(), error=error,
        # the row's metadata is upstream's `info` plus `traj`, as a QitOS run's rows hold them: export gives them back
        metadata={**(info if isinstance(info, dict) else {}), "traj": traj},
    )


def _ended(info: Any) -> bool:
    return isinstance(info, dict) and info.get("reward_info") is not None

"""Scoring side (rows, never in a run): upstream OSWorld's results layout out and in
(`qit bench export|import --format osworld`).

Upstream's `run.py` / `lib_run_single.py` (commit 89426951) write, per task,
`<root>/<action_space>/<observation_type>/<model>/<domain>/<example id>/` with `traj.jsonl` (one line per action:
`step_num`, `action_timestamp`, `action`, `reward`, `done`, `info`, `screenshot_file`), the step screenshots, and
`result.txt` (the score of `env.evaluate()`), the last only for a task its loop scored. `show_result.py` averages
the `result.txt` files.

Export writes that layout from QitOS rows and their traces: `result.txt` for each scored row, `traj.jsonl` and
screenshots from the trace's `env_step` events and `screens/`. Import reads it back into rows: a task folder with a
`result.txt` is a scored row; one without (upstream's loop crashed on it) is an `error` row, which QitOS's
headline counts as a failure and upstream's ignores, as `show_result.py` does.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from qitos.spec.run_spec import RunSpec
from qitos.trace.reader import TraceReadError, load_run
from qitos.trace.schema import RunSummary
from qitos.trace.writer import TraceWriter, new_run_id

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.results.rows import BenchmarkRunResult, ResultsFile, iter_rows
from qitos.results.trace_check import TraceCheck, row_run_dir
from qitos.benchmark.osworld.metrics import domain_of, has_score

ACTION_SPACES = ("computer_13", "pyautogui")
OBSERVATION_TYPES = ("screenshot", "a11y_tree", "screenshot_a11y_tree", "som")
_TIMESTAMP = "%Y%m%d@%H%M%S"


def model_folder(model: str | None) -> str:
    """A model id as one folder name (upstream uses its `--model` flag as given)."""
    return re.sub(r"[^A-Za-z0-9._@+-]+", "_", model or "unknown") or "unknown"


def _settings(row: dict[str, Any], run_dir: Path | None) -> tuple[str, str]:
    """(action_space, observation_type) of the run that wrote a row: from its RunSpec's resolved options."""
    observation = "screenshot_a11y_tree"
    action_space = "computer_13"  # QitOS's own recipes send computer_13 actions (and the strings WAIT/DONE/FAIL)
    if run_dir is not None:
        try:
            spec = load_run(run_dir).manifest.run_spec or {}
        except TraceReadError:
            spec = {}
        options = ((spec.get("metadata") or {}).get("options") or {}) if isinstance(spec, dict) else {}
        observation = str(options.get("observation_type") or options.get("observation") or observation)
        if (spec.get("metadata") or {}).get("recipe") == "prompt-agent":  # the others always send computer_13
            action_space = str(options.get("action_space") or action_space)
    return action_space, observation


def export_results(inputs: list[Path], out_dir: Path) -> dict[str, int]:
    """Write upstream's layout under `out_dir` from the OSWorld rows of `inputs`; returns counts."""
    counts = {"tasks": 0, "scored": 0, "skipped": 0}
    traces = TraceCheck()  # finds each row's trace as eval does
    for path in inputs:
        for row in iter_rows(path):
            if row.get("benchmark") != "osworld":
                continue
            if row.get("stop_reason") in ("requires_unavailable", "not_executed", "cancelled"):
                counts["skipped"] += 1  # never ran: upstream's loop would not have made a folder either
                continue
            domain = domain_of(str(row.get("task_id", "")))
            if domain is None:
                counts["skipped"] += 1
                continue
            example = str(row["task_id"])[len(f"osworld-{domain}-"):]
            run_dir = row_run_dir(row, Path(path), traces)
            action_space, observation = _settings(row, run_dir)
            folder = out_dir / action_space / observation / model_folder(row.get("model")) / domain / example
            if int(row.get("trial") or 0) > 0:
                folder = folder.with_name(f"{example}@trial{row['trial']}")  # upstream has one result per task
            folder.mkdir(parents=True, exist_ok=True)
            _write_traj(folder, run_dir)
            if has_score(row):
                (folder / "result.txt").write_text(f"{float(row['score'])}\n", encoding="utf-8")
                counts["scored"] += 1
            counts["tasks"] += 1
    return counts


def _write_traj(folder: Path, run_dir: Path | None) -> None:
    """`traj.jsonl` and the step screenshots, from the trace's `env_step` events and its screenshots: the steps'
    visual assets in order (the first is the observation before any action; the scoring side names them by content
    hash), or `screens/step_NNN.png` in traces written before that."""
    lines = []
    if run_dir is not None:
        try:
            trace = load_run(run_dir)
            events = trace.events
            shots = [_asset_path(a) for step in trace.steps for a in (_field(step, "visual_assets") or [])]
        except TraceReadError:
            events, shots = [], []
        for number, event in enumerate((e for e in events if e.kind == "env_step"), start=1):
            payload = event.payload or {}
            stamp = _stamp(event.ts)
            shot = f"step_{number}_{stamp}.png"
            named = shots[number] if number < len(shots) and shots[number] else None
            source = run_dir / named if named else run_dir / "screens" / f"step_{number:03d}.png"
            if source.is_file():
                shutil.copyfile(source, folder / shot)
            action = payload.get("action")
            done = isinstance(action, str) and action.strip() in ("DONE", "FAIL")
            info = {"fail": True} if done and action.strip() == "FAIL" else {"done": True} if done else {}
            lines.append(json.dumps({"step_num": number, "action_timestamp": stamp, "action": action, "reward": 0,
                                     "done": done, "info": info, "screenshot_file": shot}))
    (folder / "traj.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _field(record, name: str):
    return record.get(name) if isinstance(record, dict) else getattr(record, name, None)


def _asset_path(asset) -> str | None:
    path = _field(asset, "path")
    return path if isinstance(path, str) and ".." not in path.split("/") and not path.startswith("/") else None


def _stamp(ts: str | None) -> str:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).strftime(_TIMESTAMP)
    except ValueError:
        return "00000000@000000"


def import_results(root: Path, split: str, output: Path, trace_logdir: Path) -> list[BenchmarkRunResult]:
    """Append one row (and write one trace, holding the `traj.jsonl` lines) per task folder of upstream's layout
    under `root` (its `<action_space>/<observation>/<model>` level or any level above it)."""
    root = Path(root)
    if not root.is_dir():
        raise BenchmarkUsageError(f"{root}: not a folder; give upstream's results folder "
                                  "(<root>/<action_space>/<observation_type>/<model>/<domain>/<id>/result.txt)")
    folders = sorted(p.parent for p in root.rglob("traj.jsonl")) + sorted(p.parent for p in root.rglob("result.txt"))
    tasks = sorted(set(folders))
    if not tasks:
        raise BenchmarkUsageError(f"{root}: no task folders (no traj.jsonl or result.txt below it); expected "
                                  "upstream OSWorld's results layout")
    results = ResultsFile(Path(output))
    rows = []
    for folder in tasks:
        row = _row(folder, root, split, Path(trace_logdir))
        results.append(row)
        rows.append(row)
    return rows


def _row(folder: Path, root: Path, split: str, trace_logdir: Path) -> BenchmarkRunResult:
    parts = folder.relative_to(root).parts
    if len(parts) < 2:
        raise BenchmarkUsageError(f"{folder}: expected <domain>/<example id> folders under {root}")
    domain, example = parts[-2], parts[-1]
    setting = dict(zip(("action_space", "observation_type", "model"), parts[-5:-2])) if len(parts) >= 5 else {}
    model = f"imported:{setting.get('model', root.name)}"
    spec = RunSpec(model_name=model, model_family="imported", benchmark_name="osworld", benchmark_split=split,
                   prompt_protocol="osworld upstream run.py (imported)",
                   metadata={"imported_from": str(root), **setting})
    traj_file = folder / "traj.jsonl"
    traj = [json.loads(line) for line in traj_file.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if traj_file.is_file() else []
    result = folder / "result.txt"
    score, error = None, None
    if result.is_file():
        text = result.read_text(encoding="utf-8").strip()
        try:
            score = float(text)
        except ValueError:
            raise BenchmarkUsageError(f"{result}: '{text[:40]}' is not a number (upstream writes the score)") from None
    else:
        error = "no result.txt: upstream's loop did not score this task"
    example, _, trial = example.partition("@trial")  # export's name for trials after the first
    trial_number = int(trial) if trial.isdigit() else 0
    tid = f"osworld-{domain}-{example}"
    stop = "env_terminal" if score is not None else "error"
    writer = TraceWriter(trace_logdir, new_run_id("osworld-import", tid, trial_number), fsync="never")
    writer.update(model_id=model, model_family="imported", benchmark_name="osworld", benchmark_split=split,
                  prompt_protocol=spec.prompt_protocol,
                  run_spec={**spec.model_dump(mode="json"), "fingerprint": spec.fingerprint()},
                  task={"id": tid, "objective": f"OSWorld {domain} task {example} (imported)",
                        "metadata": {"benchmark": "osworld", "split": split, "domain": domain}})
    writer.write_manifest()
    for line in traj:
        writer.event("imported_step", "ACT", line, step_id=None)
    writer.finalize("failed" if error else "completed",
                    RunSummary(stop_reason=stop, steps=len(traj),
                               failure_report={"type": "upstream", "message": error} if error else None),
                    evaluation={"score": score} if score is not None else None)
    return BenchmarkRunResult(
        task_id=tid, benchmark="osworld", split=split, trial=trial_number, model=model,
        success=None if score is None else score >= 1.0, score=score, stop_reason=stop, steps=len(traj),
        trace_run_dir=str(writer.run_dir), run_spec_ref=spec.fingerprint(), error=error,
        metadata={"domain": domain, "status": "scored" if score is not None else "error",
                  "imported_folder": str(folder), **setting})

"""`qit bench eval` scores a claimed success again from its trace, where the trace holds all the score depends on.

The scoring side records in each manifest's `evaluation` what it scored: the run's final answer, and for
CyBench the answer given to each question (`answers`). Eval loads the benchmark's gold itself (the
dataset the run's ExperimentSpec names: `--root`, split, subset, options; the data dir of `qit bench
eval --data-dir` or the default), checks it is the same dataset (the RunSpec's `dataset_digest`), and
runs the benchmark's own scorer on the recorded answers: the adapter's `rescore` where the family has a rule of
its own (CyBench: each question's answer plus the trace's model replies, for partial credit), else `evaluate` on
the final answer (jsonl, GAIA). A row whose stored success or score the
recomputation does not give counts as a failure. Benchmarks whose score rests on a state only the run
saw (Tau-Bench's database, a desktop or VM) are not recomputed here; rows whose data eval cannot load
are counted as not recomputed, never failed for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

RECOMPUTED = ("jsonl", "gaia", "cybench")


def rescore_input(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """What recomputing needs from a manifest (kept per trace by `TraceCheck`), or None for other benchmarks."""
    spec = manifest.get("run_spec") if isinstance(manifest.get("run_spec"), dict) else {}
    bench = spec.get("benchmark_name")
    evaluation = manifest.get("evaluation") if isinstance(manifest.get("evaluation"), dict) else {}
    if bench not in RECOMPUTED or "final_answer" not in evaluation:
        return None
    experiment = manifest.get("experiment_spec") if isinstance(manifest.get("experiment_spec"), dict) else {}
    meta = experiment.get("benchmark_metadata") if isinstance(experiment.get("benchmark_metadata"), dict) else {}
    return {"benchmark": bench, "split": experiment.get("benchmark_split"), "subset": meta.get("subset"),
            "root": meta.get("root"), "options": meta.get("options") or {}, "variant": meta.get("variant"),
            "digest": spec.get("dataset_digest"), "final_answer": evaluation.get("final_answer"),
            "answers": evaluation.get("answers")}


class Rescorer:
    """Loads each dataset once; `problem` says why a row's stored result is not what its trace gives."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self.data_dir = data_dir
        self._loaded: dict[tuple, Any] = {}
        self.recomputed = 0
        self.not_recomputed: dict[str, int] = {}  # why -> rows

    def _skip(self, why: str) -> None:
        self.not_recomputed[why] = self.not_recomputed.get(why, 0) + 1

    def problem(self, row: dict[str, Any], run_dir: str, info: dict[str, Any] | None, results_file: Path) -> str | None:
        if info is None:
            return None
        loaded = self._load(info, results_file)
        if isinstance(loaded, str):
            self._skip(loaded)
            return None
        adapter, tasks, load = loaded
        task = tasks.get(row["task_id"])
        if task is None:
            return f"task {row['task_id']} is not in the dataset its trace names"
        try:
            success, score = _score(adapter, task, info, run_dir, load)
        except Exception as exc:  # noqa: BLE001 - a trace the scorer cannot read: not recomputed, said so
            self._skip(f"the scorer failed ({type(exc).__name__})")
            return None
        self.recomputed += 1
        if success != row.get("success") or (score is not None and row.get("score") is not None
                                             and abs(float(score) - float(row["score"])) > 1e-9):
            return (f"recomputed from its trace: success={str(success).lower()} score={score}, "
                    f"row success={str(row.get('success')).lower()} score={row.get('score')}")
        return None

    def _load(self, info: dict[str, Any], results_file: Path) -> tuple[Any, dict[str, Any], Any] | str:
        key = (info["benchmark"], info["split"], info["subset"], info["root"], info["variant"],
               repr(sorted(info["options"].items())), str(results_file.parent))
        if key not in self._loaded:
            self._loaded[key] = self._load_now(info, results_file)
        return self._loaded[key]

    def _load_now(self, info: dict[str, Any], results_file: Path) -> tuple[Any, dict[str, Any], Any] | str:
        from qitos.benchmark.base import LoadOptions
        from qitos.benchmark.registry import get_adapter

        root = _find_root(info["root"], results_file)
        if info["root"] and root is None:
            return f"{info['benchmark']} data {info['root']} not found"
        load = LoadOptions(root=root, split=info["split"], subset=info["subset"], variant=info["variant"],
                           options=dict(info["options"]), **({"data_dir": self.data_dir} if self.data_dir else {}))
        adapter = get_adapter(info["benchmark"])
        try:
            tasks = adapter.load_tasks(load)
        except Exception as exc:  # noqa: BLE001 - no data here: nothing to recompute against
            return f"{info['benchmark']} data not loadable here ({type(exc).__name__})"
        if info["digest"] and adapter.dataset_digest(load, tasks) != info["digest"]:
            return f"{info['benchmark']} data differs from the run's (dataset digest)"
        return adapter, {t.id: t for t in tasks}, load


def _find_root(root: str | None, results_file: Path) -> Path | None:
    if not root:
        return None
    if os.path.isabs(root):
        return Path(root) if os.path.exists(root) else None
    folder = results_file.resolve().parent
    for base in (Path.cwd(), folder, folder.parent):
        if (base / root).exists():
            return base / root
    return None


def _score(adapter: Any, task: Any, info: dict[str, Any], run_dir: str,
           load: Any) -> tuple[bool | None, float | None]:
    recorded = {"final_answer": info["final_answer"], "answers": info["answers"]}
    evaluation = adapter.rescore(task, recorded, run_dir, load)  # the family's own rule (CyBench: every answer)
    if evaluation is None:  # none: its scorer on the recorded final answer
        result = SimpleNamespace(final_answer=info["final_answer"], run_dir=run_dir, final_state=None)
        evaluation = adapter.evaluate(task, result, None)
    return evaluation.success, evaluation.score

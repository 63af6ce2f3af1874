"""Does a row's trace back it? `qit bench eval` and `import` check rows against the traces they name.

A row that claims success must point at a complete trace of the same task, trial and configuration whose
scoring-side evaluation records that success; one trace backs at most one row. Kept apart from the results
file itself (`rows.py`), which only writes and reads rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson

from qitos.results.rows import _short


def trace_run_spec(rows: Iterable[dict[str, Any]], locate: Callable[[str], str | None] | None = None
                   ) -> dict[str, Any] | None:
    """The RunSpec (as JSON) in the first readable trace manifest the rows point at; None when none is readable.

    `locate` maps a row's trace_run_dir to the directory to read (eval's TraceCheck knows where relative ones are).
    """
    for row in rows:
        run_dir = row.get("trace_run_dir")
        if not run_dir:
            continue
        run_dir = (locate(run_dir) if locate else None) or run_dir
        try:
            manifest = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest.get("run_spec"), dict):
            return manifest["run_spec"]
    return None


def expects_trace(stop_reason: Any) -> bool:
    """Whether a row with this stop reason must have a trace: its agent ran (answered, ended the episode or
    used up a budget)."""
    return stop_reason in ("final", "env_terminal", "asset_quota", "memory_limit", "process_limit",
                           "file_size_limit", "cpu_time_limit") or (isinstance(stop_reason, str)
                                                                    and stop_reason.startswith("budget_"))


class TraceCheck:
    """Checks rows against their traces for `qit bench eval`: a claimed success must be backed by its trace.

    The manifest's `evaluation` is written by the scoring side, so it must record the row's success and
    score, and the manifest's task id, trial (from its run id) and RunSpec fingerprint must be the row's; one
    trace backs at most one claimed success, and where `rescorer` can, the score is recomputed from the trace. Only the manifests of rows
    that claim success are read, once per directory, as plain JSON: validating a whole `Manifest` with
    `qitos.trace.reader` costs about 65 µs each, seconds over 100,000 rows. Whether the trace of any other
    row exists is a lookup in its parent folder's listing, read once. A relative trace_run_dir is as
    `qit bench run` wrote it (relative to where it ran): tried as given, then beside the results file and
    one folder up (`results/` next to `runs/`, the default layout).
    """

    def __init__(self, rescorer: Any = None) -> None:
        self.rescorer = rescorer  # rescore.Rescorer: scores claimed successes again from their traces
        self._backing: dict[str, str] = {}  # trace dir, run id -> the row it backs (one trace backs at most one row)
        self._checked = 0
        self._manifests: dict[str, tuple[Any, ...] | str] = {}
        self._listings: dict[str, set[str]] = {}
        self._bases: dict[str, list[str]] = {}
        self.located: dict[str, str] = {}  # trace_run_dir as written -> the directory found

    def problem(self, row: dict[str, Any], results_file: Path, line: int | None = None) -> str | None:
        """Why `row` does not match its trace, or None when it does (or, not claiming success, needs none)."""
        claims = row.get("success") is True
        if not claims and not expects_trace(row.get("stop_reason")):
            return None
        ref = row.get("trace_run_dir")
        if not isinstance(ref, str) or not ref:
            return "claims success but has no trace_run_dir" if claims else "has no trace_run_dir"
        run_dir = self.locate(ref, results_file)
        if run_dir is None:
            return f"trace {ref} not found"
        if not claims:
            return None
        manifest = self._manifest(run_dir)
        if isinstance(manifest, str):
            return manifest
        problem = _disagreement(row, manifest)
        if problem is not None:
            return problem
        self._checked += 1
        this = f"{results_file}:{line if line is not None else '#' + str(self._checked)} {row['task_id']}"
        for key in (os.path.realpath(run_dir), manifest[5]):  # the folder, and its run id (a copied folder keeps it)
            if key is not None and self._backing.setdefault(key, this) != this:
                return f"trace already backs another row ({self._backing[key]})"
        if self.rescorer is not None:
            return self.rescorer.problem(row, run_dir, manifest[4], results_file)
        return None

    def locate(self, ref: str, results_file: Path) -> str | None:
        """The run directory `ref` names, or None when there is none."""
        ref = ref.rstrip("/")
        if os.path.isabs(ref):
            return ref if self._exists(ref) else None
        bases = self._bases.get(str(results_file))
        if bases is None:
            folder = os.path.dirname(os.path.abspath(results_file))
            bases = list(dict.fromkeys(["", folder + "/", os.path.dirname(folder) + "/"]))
            self._bases[str(results_file)] = bases
        for i, base in enumerate(bases):
            if self._exists(base + ref):
                if i:  # the file's next rows are most likely there too
                    bases.insert(0, bases.pop(i))
                self.located[ref] = base + ref
                return base + ref
        return None

    def _exists(self, path: str) -> bool:
        parent, name = os.path.split(path)
        names = self._listings.get(parent)
        if names is None:
            try:
                names = set(os.listdir(parent or "."))
            except OSError:
                names = set()
            self._listings[parent] = names
        return name in names

    def _manifest(self, run_dir: str) -> tuple[Any, ...] | str:
        """(task id, fingerprint, evaluation) of the run's manifest, or why it cannot be read. Only these are
        kept: holding 40,000 whole manifests would cost a gigabyte and make every garbage collection crawl."""
        cached = self._manifests.get(run_dir)
        if cached is None:
            try:
                data: Any = orjson.loads(_read(run_dir + "/manifest.json"))
            except FileNotFoundError:
                data = "trace has no manifest.json"
            except (OSError, orjson.JSONDecodeError):
                data = "trace manifest is unreadable"
            if isinstance(data, dict):
                from qitos.results.rescore import rescore_input

                task, spec, evaluation = data.get("task"), data.get("run_spec"), data.get("evaluation")
                cached = (task.get("id") if isinstance(task, dict) else None,
                          spec.get("fingerprint") if isinstance(spec, dict) else None,
                          {k: evaluation[k] for k in ("success", "score") if k in evaluation}
                          if isinstance(evaluation, dict) else {},
                          _trial_of(data.get("run_id")), rescore_input(data),
                          data["run_id"] if isinstance(data.get("run_id"), str) else None)
            else:
                cached = data if isinstance(data, str) else "trace manifest is not a JSON object"
            self._manifests[run_dir] = cached
        return cached


def _read(path: str) -> bytes:
    """The file's bytes through one descriptor (half the cost of `open().read()` per small file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = [os.read(fd, 1 << 16)]
        while len(chunks[-1]) == 1 << 16:
            chunks.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    return b"".join(chunks)


def _trial_of(run_id: Any) -> int | None:
    """The trial a run id names (`<prefix>_<task>_<trial>_<stamp>_<hex>`, `new_run_id`), None if it names none."""
    parts = run_id.rsplit("_", 3) if isinstance(run_id, str) else []
    return int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else None


def _disagreement(row: dict[str, Any], manifest: tuple[Any, ...]) -> str | None:
    task_id, fingerprint, evaluation, trial = manifest[:4]
    if task_id != row["task_id"]:
        return f"trace is of task {task_id}"
    if trial is not None and trial != row.get("trial", 0):
        return f"trace is of trial {trial}, the row of trial {row.get('trial', 0)}"
    if row.get("run_spec_ref") is not None and fingerprint != row["run_spec_ref"]:
        return f"trace RunSpec {fingerprint} is not the row's {row['run_spec_ref']}"
    if not evaluation:
        return "trace records no evaluation"
    for key, value in evaluation.items():  # an imported trace may record only the score
        if value != row.get(key):
            return f"trace says {key}={_short(value)}, row {key}={_short(row.get(key))}"
    return None


def discredit(row: dict[str, Any], reason: str) -> None:
    """Make a success its trace does not back count like an unscored row: no success, score or reward."""
    row["success"] = row["score"] = None
    metadata = row.get("metadata")
    if isinstance(metadata, dict) and "reward" in metadata:  # Tau-Bench's figures read the reward
        row["metadata"] = {k: v for k, v in metadata.items() if k != "reward"}
    row["trace_mismatch"] = reason


def row_run_dir(row: dict[str, Any], results_file: Path, check: TraceCheck | None = None) -> Path | None:
    """A row's trace directory, found where `qit bench eval` finds it (`TraceCheck.locate`); None without one.
    Pass one `check` for many rows of a file: it caches folder listings."""
    ref = row.get("trace_run_dir")
    if not isinstance(ref, str) or not ref:
        return None
    found = (check or TraceCheck()).locate(ref, results_file)
    return Path(found) if found else None


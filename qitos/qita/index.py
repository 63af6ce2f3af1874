"""A SQLite index over a log directory, so list pages never read traces.

One row per run directory, built from `manifest.json` only (plus success from the results
files given to the board). The index lives outside the logdir (see `BoardConfig.index_path`):
the board never writes into run directories. Updates are incremental:

- a run whose manifest mtime is unchanged is not re-read;
- new directories are found when the logdir's own mtime changes;
- "live" runs (running, or with a problem such as a corrupt manifest) are re-read on every
  refresh, so a run being written shows its progress and a dead writer turns `interrupted`;
- every `FULL_SWEEP_SECONDS` all manifests are stat'ed again to catch anything else.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from qitos.results.rows import RowIssue, iter_rows
from qitos.trace.reader import effective_status
from qitos.trace.schema import Manifest

INDEX_VERSION = 7
FULL_SWEEP_SECONDS = 60.0

COLUMNS = ("name", "mtime_ns", "manifest_status", "status", "problem", "run_id", "benchmark", "split", "model",
           "model_family", "official", "success", "score", "stop_reason", "steps", "tokens", "cost", "latency",
           "created_at", "updated_at", "task_id", "objective", "final_result", "search", "live", "subset", "trial",
           "recipe", "run_spec_ref", "results_file", "unaided")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
  name TEXT PRIMARY KEY, mtime_ns INTEGER, manifest_status TEXT, status TEXT, problem TEXT, run_id TEXT,
  benchmark TEXT, split TEXT, model TEXT, model_family TEXT, official INTEGER, success INTEGER, score REAL,
  stop_reason TEXT, steps INTEGER, tokens INTEGER, cost REAL, latency REAL, created_at TEXT, updated_at TEXT,
  task_id TEXT, objective TEXT, final_result TEXT, search TEXT, live INTEGER, subset TEXT, trial INTEGER,
  recipe TEXT, run_spec_ref TEXT, results_file TEXT, unaided INTEGER
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE INDEX IF NOT EXISTS runs_benchmark ON runs(benchmark, split);
CREATE INDEX IF NOT EXISTS runs_model ON runs(model);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE INDEX IF NOT EXISTS runs_stop ON runs(stop_reason);
CREATE INDEX IF NOT EXISTS runs_live ON runs(live);
CREATE INDEX IF NOT EXISTS runs_config ON runs(results_file, run_spec_ref);
CREATE TABLE IF NOT EXISTS outcomes (name TEXT PRIMARY KEY, success INTEGER, score REAL, file TEXT, trial INTEGER);
"""


@dataclass
class RefreshStats:
    scanned: int = 0
    parsed: int = 0
    removed: int = 0
    seconds: float = 0.0
    reread: set[str] = field(default_factory=set)


def _text(value: Any, limit: int = 500) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text[:limit]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


KNOWN_STATUSES = frozenset({"running", "completed", "failed", "cancelled"})


def _shape_problem(m: dict[str, Any]) -> str | None:
    """Cheap checks of the fields the list relies on (full validation happens on the run page)."""
    if m.get("status") not in KNOWN_STATUSES:
        return f"manifest status {str(m.get('status'))[:40]!r} is not one of {', '.join(sorted(KNOWN_STATUSES))}"
    if not isinstance(m.get("created_at"), str):
        return "manifest has no created_at"
    if not isinstance(m.get("step_count", 0), int):
        return "manifest step_count is not an integer"
    return None


_TRIAL = re.compile(r"_(\d+)_\d{8}T\d{6}_[0-9a-f]{6}$")


def _trial(run_id: str) -> int | None:
    """The trial number written into run ids (`<prefix>_<task>_<trial>_<UTC stamp>_<6 hex>`)."""
    match = _TRIAL.search(run_id)
    return int(match.group(1)) if match else None


def _unaided(m: dict[str, Any]) -> int | None:
    """The `agent_unaided` official check: 0 when the run read gold (an oracle), None when not recorded."""
    for check in m.get("official_checks") or []:
        if isinstance(check, dict) and check.get("check") == "agent_unaided":
            return 1 if check.get("passed") else 0
    return None


def row_from_manifest(name: str, mtime_ns: int, data: Any, problem: str | None = None) -> dict[str, Any]:
    """Index row for one run; tolerant of missing or mistyped fields (they become NULL)."""
    m = _dict(data)
    if data is not None and not m:
        problem = problem or "manifest is not a JSON object"
    summary, task, spec = _dict(m.get("summary")), _dict(m.get("task")), _dict(m.get("run_spec"))
    usage = _dict(m.get("token_usage")) or _dict(summary.get("token_usage"))
    manifest_status = m.get("status") if isinstance(m.get("status"), str) else None
    status = manifest_status or "unknown"
    if status == "running":
        status = effective_status(Manifest.model_construct(
            status="running", writer=_dict(m.get("writer")), updated_at=str(m.get("updated_at") or "")))
    evaluation = _dict(m.get("evaluation"))  # written by `qit bench run` after scoring
    spec_meta = _dict(spec.get("metadata"))
    success = evaluation.get("success", summary.get("success"))
    row = {
        "name": name, "mtime_ns": mtime_ns, "manifest_status": manifest_status, "status": status, "problem": problem,
        "run_id": _text(m.get("run_id"), 200) or name,
        "benchmark": _text(m.get("benchmark_name") or spec.get("benchmark_name"), 200),
        "split": _text(m.get("benchmark_split") or spec.get("benchmark_split"), 200),
        "model": _text(m.get("model_id") or spec.get("model_name"), 200),
        "model_family": _text(m.get("model_family"), 100), "official": 1 if m.get("official_run") is True else 0,
        "success": None if not isinstance(success, bool) else int(success), "score": _num(evaluation.get("score")),
        "stop_reason": _text(summary.get("stop_reason"), 100),
        "steps": int(_num(m.get("step_count")) or _num(summary.get("steps")) or 0),
        "tokens": int(_num(usage.get("total_tokens")) or 0),
        "cost": _num(m.get("cost") if "cost" in m else summary.get("cost")),
        "latency": _num(m.get("latency_seconds")) or _num(summary.get("latency_seconds")) or 0.0,
        "created_at": _text(m.get("created_at"), 40), "updated_at": _text(m.get("updated_at"), 40),
        "task_id": _text(task.get("id"), 300), "objective": _text(task.get("objective"), 1000),
        "final_result": _text(summary.get("final_result"), 500),
        "subset": _text(spec.get("benchmark_subset") or _dict(task.get("metadata")).get("subset"), 200),
        "trial": _trial(str(m.get("run_id") or name)), "recipe": _text(spec_meta.get("recipe"), 100),
        "run_spec_ref": _text(spec.get("fingerprint"), 64), "results_file": None, "unaided": _unaided(m),
    }
    if row["problem"] is None and data is not None:
        row["problem"] = _shape_problem(m)
    searched = ("name", "run_id", "task_id", "objective", "model", "benchmark", "stop_reason", "final_result")
    row["search"] = " ".join(str(row[k] or "") for k in searched).lower()
    row["live"] = 1 if (status == "running" or row["problem"]) else 0
    return row


def read_manifest_row(run_dir: Path) -> dict[str, Any] | None:
    """Index row of a directory, or None when it is not a run directory at all."""
    path = run_dir / "manifest.json"
    try:
        st = path.stat()
    except FileNotFoundError:
        if (run_dir / "events.jsonl").exists() or (run_dir / "steps.jsonl").exists():
            return row_from_manifest(run_dir.name, 0, None, "no manifest.json (run starting, or its manifest was lost)")
        return None
    except OSError as exc:
        return row_from_manifest(run_dir.name, 0, None, f"manifest unreadable: {exc.strerror or exc}")
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        return row_from_manifest(run_dir.name, st.st_mtime_ns, None, f"corrupt manifest.json ({str(exc)[:120]})")
    return row_from_manifest(run_dir.name, st.st_mtime_ns, data)


class RunIndex:
    """The SQLite index of one logdir; safe to share between the server's worker threads."""

    def __init__(self, logdir: Path, db_path: Path, results: Iterable[Path] = (), refresh_seconds: float = 2.0) -> None:
        self.logdir = Path(logdir).resolve()
        self.db_path = Path(db_path)
        self.results = [Path(p) for p in results]
        self.refresh_seconds = refresh_seconds
        self.result_issues: list[RowIssue] = []
        self.version = 0  # bumped whenever rows change (cache key for facets)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._prepare_schema()
        self._known: dict[str, int] = {r[0]: r[1] for r in self._db.execute("SELECT name, mtime_ns FROM runs")}
        self._logdir_mtime: int | None = None
        self._results_mtimes: dict[Path, int] = {}
        self._last_refresh = 0.0
        self._last_sweep = 0.0

    def _prepare_schema(self) -> None:
        self._db.executescript(_SCHEMA)
        stored = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        if stored.get("version") != str(INDEX_VERSION) or stored.get("logdir") != str(self.logdir):
            self._db.executescript("DROP TABLE IF EXISTS runs; DROP TABLE IF EXISTS outcomes; DELETE FROM meta;")
            self._db.executescript(_SCHEMA)
            self._db.executemany("INSERT INTO meta VALUES (?, ?)",
                                 [("version", str(INDEX_VERSION)), ("logdir", str(self.logdir))])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- refresh -----------------------------------------------------------------------------
    def refresh(self, force: bool = False) -> RefreshStats | None:
        """Bring the index up to date; cheap when called often (see the module docstring)."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_refresh < self.refresh_seconds:
                return None
            started = time.perf_counter()
            stats = RefreshStats()
            self._db.execute("BEGIN")
            try:
                self._refresh_outcomes()
                sweep = force or now - self._last_sweep >= FULL_SWEEP_SECONDS
                logdir_mtime = self.logdir.stat().st_mtime_ns
                if sweep or logdir_mtime != self._logdir_mtime:
                    self._scan_dirs(stats, stat_all=sweep)
                    self._logdir_mtime = logdir_mtime
                    if sweep:
                        self._last_sweep = now
                live = [r[0] for r in self._db.execute("SELECT name FROM runs WHERE live = 1")]
                for name in live:
                    if name not in stats.reread:
                        self._reread(name, stats)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._last_refresh = time.monotonic()
            stats.seconds = time.perf_counter() - started
            return stats

    def _scan_dirs(self, stats: RefreshStats, stat_all: bool) -> None:
        on_disk: set[str] = set()
        with os.scandir(self.logdir) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
                on_disk.add(entry.name)
                stats.scanned += 1
                if entry.name not in self._known:
                    self._reread(entry.name, stats)
                elif stat_all:
                    try:
                        mtime = os.stat(os.path.join(entry.path, "manifest.json")).st_mtime_ns
                    except OSError:
                        mtime = 0
                    if mtime != self._known[entry.name]:
                        self._reread(entry.name, stats)
        gone = [name for name in self._known if name not in on_disk]
        for name in gone:
            self._db.execute("DELETE FROM runs WHERE name = ?", (name,))
            del self._known[name]
            stats.removed += 1
            self.version += 1

    def _reread(self, name: str, stats: RefreshStats) -> None:
        row = read_manifest_row(self.logdir / name)
        if row is None:
            return
        outcome = self._db.execute("SELECT success, score, file, trial FROM outcomes WHERE name = ?", (name,)).fetchone()
        if outcome is not None:
            row["success"] = row["success"] if row["success"] is not None else outcome[0]
            row["score"] = outcome[1]
            row["results_file"] = outcome[2]
            row["trial"] = outcome[3] if outcome[3] is not None else row["trial"]
        self._db.execute(f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                         [row[c] for c in COLUMNS])
        self._known[name] = row["mtime_ns"]
        stats.parsed += 1
        stats.reread.add(name)
        self.version += 1

    def _refresh_outcomes(self) -> None:
        """Success of each run from the results files (rows join runs by the trace dir's name)."""
        mtimes = {p: (p.stat().st_mtime_ns if p.exists() else 0) for p in self.results}
        if mtimes == self._results_mtimes:
            return
        self._results_mtimes = mtimes
        self.result_issues = []
        outcomes: dict[str, tuple[int | None, float | None, str, int | None]] = {}
        for path in self.results:
            if not path.exists():
                continue
            for row in iter_rows(path, self.result_issues):
                run_dir = row.get("trace_run_dir")
                if isinstance(run_dir, str) and run_dir:
                    success = row.get("success")
                    trial = row.get("trial")
                    outcomes[Path(run_dir).name] = (None if not isinstance(success, bool) else int(success),
                                                    _num(row.get("score")), str(path),
                                                    trial if isinstance(trial, int) else None)
        self._db.execute("DELETE FROM outcomes")
        self._db.executemany("INSERT INTO outcomes VALUES (?, ?, ?, ?, ?)", [(k, *v) for k, v in outcomes.items()])
        self._db.execute("UPDATE runs SET results_file = NULL")
        self._db.execute("UPDATE runs SET success = o.success, score = o.score, results_file = o.file, "
                         "trial = COALESCE(o.trial, runs.trial) FROM outcomes o WHERE o.name = runs.name")
        self.version += 1

    # -- reads -------------------------------------------------------------------------------
    def query(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, list(params)).fetchall()

    def get(self, name: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM runs WHERE name = ?", (name,))
        return dict(rows[0]) if rows else None

    def has(self, name: str) -> bool:
        return name in self._known

    def count(self) -> int:
        return int(self.query("SELECT COUNT(*) FROM runs")[0][0])

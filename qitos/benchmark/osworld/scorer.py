"""Scoring side: where upstream's OSWorld metrics run. Never in this process, when bubblewrap works here.

Upstream's metrics read what the agent made: files fetched from the VM and values it can set (a gsettings string
`check_gnome_favorite_apps` passes to `eval`, a Python file `check_python_file_by_test_suite` imports and runs). The
scoring process holds every task's gold and the results file, so a metric runs elsewhere: each metric call gets a
fresh `BwrapSandbox` (the command sandbox: no network, a private /tmp and home, every capability
dropped, a time, memory, process and disk limit) and one short-lived process there (`scorer_main.py`). What that
process sees, read-only: the system, the Python installation, QitOS's package and the checkout's
`desktop_env/evaluators`. Read-write, as `/task`: a fresh private copy of the files this evaluation's getters
fetched (the VM's files and the task's gold files), and nothing else of the task's cache dir, so what one call runs
cannot change what the next reads. The values the getters returned and the task's options go in on stdin, paths
rewritten to the copy; a number comes back.

The scoring side believes only a finite number in [0, 1] (upstream's metrics' range). A metric that raises is
named as the in-process path names it (`<Exception>: <message>`); past its time or memory, or answering anything
else, the evaluation ends `error` with the reason (`ScorerFailed`). Code a metric runs (the agent's Python) can
still decide that metric's own answer, as it can upstream; it can no longer reach anything else.

Without bubblewrap the metrics run in this process, as before, and the run is not official (`scorer_isolated`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import pickle
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from qitos.sandbox.bwrap import BwrapSandbox, SandboxSetupError, SandboxUnavailable, remove_tree
from qitos.sandbox.limits import GIB, SandboxLimits, human
from qitos.benchmark.osworld.errors import OSWorldError
from qitos.benchmark.osworld.upstream import OPTIONAL_PACKAGES, OptionalPackageMissing, UpstreamEvaluators

SCORER_SCRIPT = Path(__file__).resolve().parent / "scorer_main.py"
TASK = "/task"
MAX_ANSWER_BYTES = 8192

# one metric call: (metric name, positional arguments, options) -> its value
MetricCall = Callable[[str, tuple[Any, ...], dict[str, Any]], Any]


class ScorerFailed(OSWorldError):
    """The confined scorer gave no score: it ran past a limit, or answered something that is not one."""


class MetricRaised(OSWorldError):
    """Upstream's metric raised in the scorer; `str()` names it as the in-process path does."""


@dataclass(frozen=True)
class ScorerLimits:
    """Per metric call, each in its own sandbox (disk: the copied files count)."""

    seconds: float = 300.0
    memory_bytes: int = 4 * GIB
    max_processes: int = 128
    disk_bytes: int = 8 * GIB

    def describe(self) -> str:
        return (f"per metric call {self.seconds:g} s, {human(self.memory_bytes)} of memory, {self.max_processes} "
                f"processes, {human(self.disk_bytes)} of disk")


def scorer_isolation(limits: ScorerLimits | None = None) -> tuple[bool, str]:
    """(will metrics run confined here, how / why not): the `scorer_isolated` check's verdict."""
    ok, reason = BwrapSandbox.available()
    if ok:
        return True, ("upstream's metrics ran in a bubblewrap scorer process of their own per metric call: no network, "
                      "only the evaluation's fetched files and expected values; "
                      + (limits or ScorerLimits()).describe())
    return False, (f"upstream's metrics ran in the scoring process, on files and values from the VM the agent "
                   f"controls: {reason}")


@contextlib.contextmanager
def metric_runner(evaluators: UpstreamEvaluators, cache_dir: Path, confined: bool | None = None,
                  limits: ScorerLimits | None = None) -> Iterator[MetricCall]:
    """One evaluation's way to call metrics: confined when `confined` (None: when bubblewrap works here)."""
    if confined is None:
        confined = BwrapSandbox.available()[0]
    if not confined:
        yield lambda name, args, options: evaluators.metric(name)(*args, **options)  # type: ignore[misc]
        return
    with ConfinedScorer(evaluators, cache_dir, limits or ScorerLimits()) as scorer:
        yield scorer.call


class ConfinedScorer:
    """One evaluation's metric calls, each a fresh process in a fresh sandbox: its own copy of the evaluation's
    files as `/task`, its own /tmp and home, so nothing one call runs (the agent's Python) reaches the next."""

    def __init__(self, evaluators: UpstreamEvaluators, cache_dir: Path, limits: ScorerLimits) -> None:
        self.evaluators, self.limits = evaluators, limits
        given = str(cache_dir).rstrip("/")
        self.prefixes = sorted({given, os.path.abspath(given), os.path.realpath(given)}, key=len, reverse=True)
        self.cache = Path(os.path.abspath(given))
        self.stamps = dict(_files(self.cache))  # the task's cache before the getters ran (setup downloads)
        self.given: set[str] = set()  # what the metric calls get: files fetched since, and files the values name
        self.private = Path(tempfile.mkdtemp(prefix="qitos-osworld-scorer-"))

    def __enter__(self) -> ConfinedScorer:
        return self

    def __exit__(self, *_exc: object) -> None:
        remove_tree(self.private)

    def call(self, name: str, args: tuple[Any, ...], options: dict[str, Any]) -> float:
        self._fetched()
        function = self.evaluators.metric(name)
        module = getattr(function, "__module__", "") or ""
        job = {"checkout": str(self.evaluators.root.parent.parent), "func": name,
               "module": module[len(self.evaluators.namespace) + 1:], "attr": getattr(function, "__name__", name),
               "args": self._inside(args), "options": options}
        try:
            payload = base64.b64encode(pickle.dumps(job)).decode()
        except Exception as exc:  # noqa: BLE001 - a getter's value that cannot travel is named
            raise ScorerFailed(f"{name}: the getters' values cannot be sent to the scorer: {exc}") from None
        work = Path(tempfile.mkdtemp(dir=self.private))
        try:
            for rel in sorted(self.given):
                _copy(self.cache / rel, work, rel)
            with self._sandbox(work) as sandbox:
                done = sandbox.run([sys.executable, str(SCORER_SCRIPT)], stdin=payload)
        except (SandboxSetupError, SandboxUnavailable, OSError) as exc:
            raise ScorerFailed(f"{name}: the scorer sandbox did not start: {exc}") from None
        finally:
            remove_tree(work)
        if done.timed_out:
            raise ScorerFailed(f"{name}: the metric ran past the scorer's time limit ({self.limits.seconds:g} s)")
        if done.limit:
            raise ScorerFailed(f"{name}: the metric reached the scorer's {done.limit} limit "
                               f"({self.limits.describe()})")
        return _score(name, done.stdout, done.exit_code, done.stderr)

    def _sandbox(self, work: Path) -> BwrapSandbox:
        import qitos

        from qitos.run.sides.confine import python_paths

        limits = self.limits
        return BwrapSandbox(
            work, network=False, timeout_seconds=limits.seconds, max_output_bytes=MAX_ANSWER_BYTES,
            python_ro=python_paths(), ro_binds=[str(self.evaluators.root)],
            env={"PYTHONPATH": str(Path(qitos.__file__).resolve().parent.parent), "PYTHONDONTWRITEBYTECODE": "1",
                 "PYTHONNOUSERSITE": "1"},
            limits=SandboxLimits(memory_bytes=limits.memory_bytes, max_processes=limits.max_processes,
                                 disk_bytes=limits.disk_bytes))

    def _inside(self, value: Any) -> Any:
        """`value` with each path into the cache dir pointing at its copy under `/task`."""
        if isinstance(value, str):
            for prefix in self.prefixes:
                if value.startswith(prefix + "/"):
                    rel = os.path.normpath(value[len(prefix) + 1:])
                    if rel.startswith("..") or os.path.isabs(rel):
                        return value
                    self.given.add(rel)
                    return f"{TASK}/{rel}"
            return value
        if type(value) in (list, tuple):
            return type(value)(self._inside(v) for v in value)
        if type(value) is dict:
            return {k: self._inside(v) for k, v in value.items()}
        return value

    def _fetched(self) -> None:
        """Note what the getters wrote into the cache since this evaluation began: the files they return and those
        beside them (a multi-file `vm_file` returns only the first; a test suite imports the others)."""
        for rel, stamp in _files(self.cache):
            if self.stamps.get(rel) != stamp:
                self.stamps[rel] = stamp
                self.given.add(rel)


def _copy(source: Path, work: Path, rel: str) -> None:
    """`source` (a regular file, or a folder's regular files) to `work/rel`, readable by the sandbox user; never a
    symlink, never twice."""
    if source.is_symlink() or (work / rel).exists():
        return
    if source.is_dir():
        for inner, _ in _files(source):
            _copy(source / inner, work, os.path.join(rel, inner))
        return
    if not source.is_file():
        return
    for folder in [*reversed(Path(rel).parents)][1:]:
        (work / folder).mkdir(exist_ok=True)
        (work / folder).chmod(0o755)
    shutil.copyfile(source, work / rel, follow_symlinks=False)
    (work / rel).chmod(0o644)


def _files(root: Path) -> list[tuple[str, tuple[int, int]]]:
    """(relative path, (mtime, size)) of every regular file under `root`, symlinks not followed."""
    found = []
    for folder, dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                found.append((os.path.relpath(path, root), (info.st_mtime_ns, info.st_size)))
    return found


def _score(name: str, stdout: str, exit_code: int | None, stderr: str) -> float:
    """The one number the scorer may answer, or why there is none."""
    lines = stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if len(lines) == 1 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        tail = stderr.strip().splitlines()[-1:] or [f"exit code {exit_code}"]
        raise ScorerFailed(f"{name}: the scorer answered no score ({tail[0][:300]})")
    if answer.get("kind") == "optional_package" and answer.get("package") in OPTIONAL_PACKAGES.values():
        raise OptionalPackageMissing(answer["package"])
    if answer.get("kind") == "exception" and isinstance(answer.get("error"), str):
        raise MetricRaised(answer["error"])
    score = answer.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
            or not 0.0 <= score <= 1.0:
        raise ScorerFailed(f"{name}: the scorer answered {str(answer)[:200]}, not a score in [0, 1]")
    return float(score)

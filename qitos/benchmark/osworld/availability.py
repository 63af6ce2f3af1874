"""Scoring side: what can run and be scored here: the task data, how many tasks the official evaluators can score
with the installed packages (cached on disk: importing them takes seconds), and the desktop provider.

`qit bench list` and `qit bench run`'s plan ask these through the adapter (`requirements`, `runnable_here`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from qitos.benchmark.base import LoadOptions, Requirement
from qitos.benchmark.osworld.config import NEEDS_CREDENTIALS
from qitos.benchmark.osworld.controller import ControllerClient
from qitos.benchmark.osworld.coverage import CoverageReport, coverage_report
from qitos.benchmark.osworld.coverage_cache import Scorability, cached_scorability
from qitos.benchmark.osworld.errors import OSWorldError
from qitos.benchmark.osworld.evaluator import resolve
from qitos.benchmark.osworld.provider import ENV_CONTROLLER, NO_PROVIDER_REASON
from qitos.benchmark.osworld.tasks import SPLITS, load_tasks, resolve_examples_dir
from qitos.benchmark.osworld.upstream import UpstreamEvaluators, evaluators_dir, load_evaluators
from qitos.benchmark.osworld.vm_pool import controller_urls, provider_kind


def data_root(load: LoadOptions) -> Path:
    return Path(load.root).expanduser() if load.root is not None else Path(load.data_dir) / "osworld"


def scoring_requirement(load: LoadOptions, examples: Path) -> Requirement:
    """How many test_all tasks the official evaluators can score here (metrics and getters resolve, optional
    packages present)."""
    try:
        report = _scorability(load, examples).coverage
    except OSWorldError as exc:
        return Requirement(name="official evaluators", ok=False, detail=str(exc))
    needs = ", ".join(f"{package} ({count})" for package, count in report.needs_package.items())
    detail = f"{report.scorable_tasks} of {report.total_tasks} test_all tasks can be scored here"
    if needs:
        detail += f"; tasks needing a missing optional package: {needs}"
    if report.unsupported:
        detail += f"; {len(report.unsupported)} name a metric or getter the checkout lacks"
    return Requirement(name="official evaluators", ok=report.scorable_tasks > 0, detail=detail)


def runnable_here(load: LoadOptions) -> dict[str, dict[str, Any]] | None:
    """Per split: tasks that can run and be scored here (the official evaluators resolve with the installed
    packages, no Google credentials needed, a desktop provider is configured), and why the others cannot; None when
    the evaluators cannot load (the adapter protocol's default then counts them)."""
    try:
        examples = resolve_examples_dir(data_root(load))
        resolutions = _scorability(load, examples).resolutions
    except OSWorldError:
        return super().runnable_here(load)
    provider = provider_requirement(load)
    out: dict[str, dict[str, Any]] = {}
    for split in SPLITS:
        tasks = load_tasks(examples, split)
        reasons: Counter[str] = Counter()
        for task in tasks:
            scorable = resolutions.get(task.task_id) or resolve(task, load_evaluators(data_root(load)))
            steps = {step.type for step in [*task.config, *task.evaluator.postconfig]}
            if scorable.status != "ready":
                reasons[f"evaluator needs {', '.join(scorable.packages)}" if scorable.packages
                        else str(scorable.reason)] += 1
            elif steps & NEEDS_CREDENTIALS:
                reasons["needs Google account credentials"] += 1
            elif not provider.ok:
                reasons[f"{provider.name}: {provider.detail}"] += 1
        out[split] = {"tasks": len(tasks), "runnable": len(tasks) - sum(reasons.values()), "reasons": dict(reasons)}
    return out


def provider_requirement(load: LoadOptions) -> Requirement:
    if provider_kind(load.options) == "docker":
        from qitos.benchmark.osworld.docker_provider import docker_requirement

        return docker_requirement(load)
    urls = controller_urls()
    if not urls:
        return Requirement(name="desktop provider", ok=False,
                           detail=f"can load and validate, cannot run: no provider; {NO_PROVIDER_REASON}")
    found = []
    for url in urls:
        try:
            with ControllerClient(url, timeout=3.0) as client:
                found.append(f"{url} ({client.platform()})")
        except (OSWorldError, ValueError) as exc:
            return Requirement(name="desktop provider", ok=False, detail=f"{ENV_CONTROLLER}: {url}: {exc}")
    return Requirement(name="desktop provider", ok=True, detail="controller(s) " + ", ".join(found))


_COVERAGE: dict[tuple[Path, Path], CoverageReport] = {}


def _scorability(load: LoadOptions, examples: Path) -> Scorability:
    """What the official evaluators can score here; on disk between commands (importing them takes seconds)."""
    root = data_root(load)

    def compute() -> Scorability:
        evaluators = load_evaluators(root)
        return Scorability(coverage=_coverage(examples, evaluators),
                           resolutions={t.task_id: resolve(t, evaluators) for t in load_tasks(examples, "test_all")})

    return cached_scorability(examples, evaluators_dir(root), compute)


def _coverage(examples: Path, evaluators: UpstreamEvaluators) -> CoverageReport:
    """The test_all coverage report, computed once per (task data, evaluators) in a process."""
    key = (examples.resolve(), evaluators.root)
    if key not in _COVERAGE:
        _COVERAGE[key] = coverage_report(load_tasks(examples, "test_all"), evaluators)
    return _COVERAGE[key]

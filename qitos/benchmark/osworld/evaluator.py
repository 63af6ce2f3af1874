"""Score one OSWorld task after an episode, following upstream's rules:

1. run the evaluator's `postconfig` steps in the desktop (e.g. save the open document);
2. `func == "infeasible"`: 1 iff the agent's last action is FAIL; for any other task a final FAIL scores 0;
3. for each metric: result = getter(result config), expected = getter(expected config),
   score = metric(result, expected, **options); a missing result (file not found) scores 0;
4. several metrics: `and` stops at the first 0 and otherwise averages, `or` stops at the first 1 and
   otherwise takes the maximum.

Outcomes say why a task could not be scored (no provider, unsupported metric or getter, an error) instead of
turning those into a silent 0.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from .actions import is_fail
from .errors import MetricDependencyMissing, OSWorldError, UnsupportedGetter
from .getters import Downloader, GetterContext, HttpDownloader, RequiresProvider, get_value, getter_available
from .metrics import get_metric, is_implemented
from .provider import NO_PROVIDER_REASON, Provider
from .tasks import MetricSpec, OSWorldTask

Status = Literal["scored", "requires_unavailable", "unsupported", "error"]


class MetricScore(BaseModel):
    func: str
    score: float | None = None
    note: str | None = None


class EvaluationOutcome(BaseModel):
    """The task score (None unless `status == "scored"`) and per-metric details."""

    task_id: str
    status: Status
    score: float | None = None
    reason: str | None = None
    metrics: list[MetricScore] = Field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status == "scored" and self.score is not None and self.score >= 1.0


def evaluate(
    task: OSWorldTask,
    provider: Provider | None = None,
    last_action: Any = None,
    *,
    downloader: Downloader | None = None,
    cache_dir: Path | str | None = None,
    run_postconfig: bool = True,
    today: dt.date | None = None,
) -> EvaluationOutcome:
    """Score a task; `last_action` is the agent's final action (dict, string, or the list of actions).

    `cache_dir` receives fetched files (a temporary folder when omitted; pass the one setup used so
    `cache_file` getters see setup outputs). `run_postconfig=False` is for offline scoring of files that were
    pulled after postconfig already ran.
    """
    if cache_dir is None:
        with tempfile.TemporaryDirectory(prefix="qitos-osworld-") as tmp:
            return _evaluate(task, provider, last_action, downloader, Path(tmp), run_postconfig, today)
    path = Path(cache_dir)
    path.mkdir(parents=True, exist_ok=True)
    return _evaluate(task, provider, last_action, downloader, path, run_postconfig, today)


def _evaluate(
    task: OSWorldTask,
    provider: Provider | None,
    last_action: Any,
    downloader: Downloader | None,
    cache_dir: Path,
    run_postconfig: bool,
    today: dt.date | None,
) -> EvaluationOutcome:
    evaluator = task.evaluator

    def outcome(status: Status, score: float | None = None, reason: str | None = None,
                metrics: list[MetricScore] | None = None) -> EvaluationOutcome:
        return EvaluationOutcome(task_id=task.task_id, status=status, score=score, reason=reason, metrics=metrics or [])

    if evaluator.is_infeasible:
        failed = is_fail(last_action)
        return outcome("scored", 1.0 if failed else 0.0,
                       "infeasible task: " + ("agent answered FAIL" if failed else "agent did not answer FAIL"))
    if is_fail(last_action):
        return outcome("scored", 0.0, "agent answered FAIL on a feasible task")

    missing = sorted({f for f in evaluator.funcs if not is_implemented(f)})
    if missing:
        return outcome("unsupported", reason=f"metric(s) not implemented by QitOS: {missing}")
    needs_desktop = (run_postconfig and evaluator.postconfig) or any(
        not getter_available(t, None) for t in evaluator.getter_types()
    )
    if needs_desktop and provider is None:
        return outcome("requires_unavailable", reason=NO_PROVIDER_REASON)
    unavailable = sorted(t for t in evaluator.getter_types() if not getter_available(t, provider))
    if unavailable:
        return outcome("unsupported", reason=f"unsupported getter(s): {unavailable}")

    if run_postconfig and provider is not None:
        try:
            for step in evaluator.postconfig:
                provider.run_step(step, cache_dir)
        except OSWorldError as exc:
            return outcome("error", reason=f"postconfig step failed: {exc}")

    ctx = GetterContext(cache_dir=cache_dir, provider=provider, downloader=downloader or HttpDownloader(), today=today)
    scores: list[MetricScore] = []
    for spec in evaluator.metric_specs():
        try:
            value = _run_metric(spec, ctx)
        except (UnsupportedGetter, MetricDependencyMissing) as exc:
            return outcome("unsupported", reason=str(exc), metrics=scores)
        except RequiresProvider as exc:
            return outcome("requires_unavailable", reason=str(exc), metrics=scores)
        except Exception as exc:  # noqa: BLE001 - a crashing metric/getter is reported, not scored as 0
            return outcome("error", reason=f"{spec.func}: {exc.__class__.__name__}: {exc}", metrics=scores)
        scores.append(value)
        if evaluator.conj == "and" and value.score == 0.0:
            return outcome("scored", 0.0, f"{spec.func} scored 0", scores)
        if evaluator.conj == "or" and value.score == 1.0:
            return outcome("scored", 1.0, f"{spec.func} scored 1", scores)
    values = [s.score or 0.0 for s in scores]
    total = sum(values) / len(values) if evaluator.conj == "and" else max(values)
    return outcome("scored", total, None, scores)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, list) and any(v is None for v in value))


def _run_metric(spec: MetricSpec, ctx: GetterContext) -> MetricScore:
    metric = get_metric(spec.func)
    result = get_value(spec.result, ctx) if spec.result is not None else None
    if spec.result is not None and _missing(result):
        return MetricScore(func=spec.func, score=0.0, note="result missing (file not found or no value)")
    if spec.expected is None:
        score = metric(result, **spec.options)
    else:
        expected = get_value(spec.expected, ctx)
        score = metric(result, expected, **spec.options)
    return MetricScore(func=spec.func, score=float(score))

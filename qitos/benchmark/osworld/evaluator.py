"""Scoring side: score one OSWorld task with the official evaluators, dispatched as upstream's `DesktopEnv.evaluate` does
(OSWorld commit 89426951, `desktop_env/desktop_env.py`):

1. run the evaluator's `postconfig` steps in the VM (upstream's SetupController logs a step the controller
   rejects and goes on; so does QitOS, noting it);
2. `func == "infeasible"`: 1 iff the agent's last action is FAIL; any other task scores 0 after a final FAIL;
3. one metric: result = get_<type>(env, result); a FileNotFoundError from it scores 0; expected =
   get_<type>(env, expected) when the evaluator has `expected`; score = metric(result, expected, **options) when
   expected is not None, else metric(result, **options);
4. a list of metrics lines up `result`/`expected`/`options` by index: `and` returns 0 at the first metric that
   scores 0 (or whose result getter raised FileNotFoundError), `or` returns 1 at the first that scores 1;
   otherwise the mean (`and`) or the maximum (`or`).

Metrics and getters are upstream's own (`upstream.py`). The getters run here, with an `UpstreamEnv`
(`upstream_env.py`); each metric call runs in the evaluation's confined scorer (`scorer.py`: a bubblewrap process
that sees only the files the getters fetched), or here when bubblewrap does not work (`confined=False`). Where
upstream would crash the run, QitOS reports instead of scoring: an optional package that is missing ends
`requires_unavailable` naming it; any other exception ends `error` with the exception named; so does a scorer that
ran past its time or memory limit or answered no score in [0, 1] (`scorer: ...`).

FAIL is upstream's: only the string `FAIL` as the last action (a computer_13 dict FAIL is not). Gold files
(`cloud_file`) are fetched through QitOS's cached downloader into the task's cache dir just before the getter that
needs them runs, metric by metric as upstream's `get_cloud_file` fetches them (a dead link for a metric that is
never reached still scores); the getter then finds the file there, as upstream's does on a rerun.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from qitos.benchmark.osworld.actions import is_fail
from qitos.benchmark.osworld.controller import ControllerClient
from qitos.benchmark.osworld.errors import ControllerError, ControllerUnreachable, OSWorldError
from qitos.benchmark.osworld.downloads import Downloader
from qitos.benchmark.osworld.provider import NO_PROVIDER_REASON, Provider
from qitos.benchmark.osworld.tasks import OSWorldTask
from qitos.benchmark.osworld.scorer import MetricCall, MetricRaised, ScorerFailed, ScorerLimits, metric_runner
from qitos.benchmark.osworld.upstream import OptionalPackageMissing, UpstreamEvaluators
from qitos.benchmark.osworld.upstream_env import UpstreamEnv, VMAddress

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
    notes: list[str] = Field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status == "scored" and self.score is not None and self.score >= 1.0


class Resolution(BaseModel):
    """Whether upstream's evaluators can score a task here: `ready`, or why not."""

    status: Literal["ready", "requires_unavailable", "unsupported"]
    reason: str | None = None
    packages: list[str] = Field(default_factory=list)


def _getter_types(raw: dict[str, Any]) -> list[str]:
    found = []
    for key in ("result", "expected"):
        value = raw.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and item.get("type"):
                found.append(str(item["type"]))
    return found


def raw_evaluator(task: OSWorldTask) -> dict[str, Any]:
    """The evaluator as the task file spells it (keys absent from the file stay absent), without postconfig."""
    return task.evaluator.model_dump(mode="json", exclude_unset=True, exclude={"postconfig"})


def resolve(task: OSWorldTask, evaluators: UpstreamEvaluators) -> Resolution:
    """Do the task's metric functions and getters exist in this checkout, and are their optional packages
    installed? (No VM needed.)"""
    raw = raw_evaluator(task)
    funcs = raw["func"] if isinstance(raw["func"], list) else [raw["func"]]
    if funcs == ["infeasible"]:
        return Resolution(status="ready")
    metrics = {name: evaluators.metric(name) for name in funcs}
    getters = {name: evaluators.getter(name) for name in _getter_types(raw)}
    absent = sorted(n for n, f in metrics.items() if f is None) + sorted(f"get_{n}" for n, f in getters.items() if f is None)
    if absent:
        return Resolution(status="unsupported", reason=f"the OSWorld evaluators at {evaluators.root} have no {absent}")
    packages = sorted(set().union(*(evaluators.needs_packages(f) for f in [*metrics.values(), *getters.values()])))
    if packages:
        return Resolution(status="requires_unavailable", packages=packages,
                          reason=f"the evaluator needs optional package(s) {packages} (pip install {' '.join(packages)})")
    return Resolution(status="ready")


def evaluate(
    task: OSWorldTask,
    evaluators: UpstreamEvaluators,
    provider: Provider | None,
    last_action: Any = None,
    *,
    address: VMAddress | None = None,
    downloader: Downloader | None = None,
    cache_dir: Path | str | None = None,
    confined: bool | None = None,
    limits: ScorerLimits | None = None,
) -> EvaluationOutcome:
    """Score a task; `last_action` is the agent's final action (dict or string); `address` says where the
    VM's controller, Chrome DevTools and VLC listen (the provider's, by default). Metrics run in a confined scorer
    when `confined` (None: when bubblewrap works here), within `limits`."""
    scoring = (confined, limits)
    if cache_dir is None:
        with tempfile.TemporaryDirectory(prefix="qitos-osworld-") as tmp:
            return _evaluate(task, evaluators, provider, last_action, address, downloader, Path(tmp), scoring)
    path = Path(cache_dir)
    path.mkdir(parents=True, exist_ok=True)
    return _evaluate(task, evaluators, provider, last_action, address, downloader, path, scoring)


def _evaluate(task: OSWorldTask, evaluators: UpstreamEvaluators, provider: Provider | None, last_action: Any,
              address: VMAddress | None, downloader: Downloader | None, cache_dir: Path,
              scoring: tuple[bool | None, ScorerLimits | None]) -> EvaluationOutcome:
    notes: list[str] = []

    def outcome(status: Status, score: float | None = None, reason: str | None = None,
                metrics: list[MetricScore] | None = None) -> EvaluationOutcome:
        return EvaluationOutcome(task_id=task.task_id, status=status, score=score, reason=reason,
                                 metrics=metrics or [], notes=notes)

    resolution = resolve(task, evaluators)
    if resolution.status != "ready":
        return outcome(resolution.status, reason=resolution.reason)
    if provider is None:
        return outcome("requires_unavailable", reason=NO_PROVIDER_REASON)
    try:
        for step in task.evaluator.postconfig:
            try:
                provider.run_step(step, cache_dir)
            except ControllerUnreachable:
                raise
            except ControllerError as exc:
                notes.append(f"postconfig {step.type}: {exc}")
    except OSWorldError as exc:
        return outcome("error", reason=f"postconfig step failed: {exc}")

    failed = is_fail(last_action)
    raw = raw_evaluator(task)
    if raw["func"] == "infeasible":
        return outcome("scored", 1.0 if failed else 0.0,
                       "infeasible task: " + ("agent answered FAIL" if failed else "agent did not answer FAIL"))
    if failed:
        return outcome("scored", 0.0, "agent answered FAIL on a feasible task")

    address = address or getattr(provider, "address", None)
    client = getattr(provider, "client", None)
    if address is None or not isinstance(client, ControllerClient):
        return outcome("requires_unavailable", reason=f"provider {provider.name} has no VM controller for the getters")
    env = UpstreamEnv(client, address, str(cache_dir))
    scores: list[MetricScore] = []
    try:
        with metric_runner(evaluators, cache_dir, *scoring) as call:
            score = _dispatch(raw, evaluators, env, scores, lambda config: _fetch_gold(config, downloader, cache_dir),
                              call)
    except OptionalPackageMissing as exc:
        return outcome("requires_unavailable", reason=str(exc), metrics=scores)
    except (ControllerUnreachable, MetricRaised) as exc:  # MetricRaised names the metric's exception itself
        return outcome("error", reason=str(exc), metrics=scores)
    except ScorerFailed as exc:
        return outcome("error", reason=f"scorer: {exc}", metrics=scores)
    except Exception as exc:  # noqa: BLE001 - upstream would crash the run; QitOS reports it, not a silent 0
        return outcome("error", reason=f"{exc.__class__.__name__}: {exc}", metrics=scores)
    return outcome("scored", float(score), None, scores)


def _fetch_gold(config: dict[str, Any], downloader: Downloader | None, cache_dir: Path) -> None:
    """Put a `cloud_file` config's gold file(s) where upstream's getter looks first (`<cache_dir>/<dest>`)."""
    if downloader is None or config.get("type") != "cloud_file":
        return
    paths, dests = config["path"], config["dest"]
    if not config.get("multi", False):
        paths, dests = [paths], [dests]
    for url, dest in zip(paths, dests):
        target = cache_dir / dest
        if not target.exists():
            downloader.fetch(url, target)


def _dispatch(raw: dict[str, Any], evaluators: UpstreamEvaluators, env: UpstreamEnv, scores: list[MetricScore],
              before_getter: Callable[[dict[str, Any]], None], call: MetricCall) -> Any:
    """Upstream's metric loop; configs are deep-copied because upstream getters may edit them in place."""
    raw = copy.deepcopy(raw)

    def get(config: dict[str, Any]) -> Any:
        before_getter(config)
        return _call_getter(evaluators, env, config)

    conj = raw.get("conj", "and")
    if isinstance(raw["func"], list):
        funcs = raw["func"]
        options = raw.get("options", {})
        # as upstream: a dict here would be indexed by position (KeyError); no task file does that
        option_list = [o if o else {} for o in options] if isinstance(options, list) else \
            options if "options" in raw else [{}] * len(funcs)
        results: list[Any] = []
        result_state: Any = _UNSET
        for index, name in enumerate(funcs):
            try:
                config = raw["result"][index]
                result_state = get(config)
            except FileNotFoundError:
                scores.append(MetricScore(func=name, score=0.0, note="result file not found"))
                if conj == "and":
                    return 0
            if result_state is _UNSET:  # upstream: UnboundLocalError when the first `or` getter finds no file
                raise OSWorldError(f"{name}: result getter found no file and no earlier result exists")
            expected = raw["expected"][index]
            expected_state = get(expected) if expected else None
            args = (result_state, expected_state) if expected_state is not None else (result_state,)
            value = call(name, args, option_list[index])
            scores.append(MetricScore(func=name, score=float(value)))
            if conj == "and" and float(value) == 0.0:
                return 0
            if conj == "or" and float(value) == 1.0:
                return 1
            results.append(value)
        return sum(results) / len(results) if conj == "and" else max(results)
    try:
        result_state = get(raw["result"])
    except FileNotFoundError:
        scores.append(MetricScore(func=raw["func"], score=0.0, note="result file not found"))
        return 0
    expected_state = get(raw["expected"]) if "expected" in raw else None
    options = raw.get("options", {})
    args = (result_state, expected_state) if expected_state is not None else (result_state,)
    value = call(raw["func"], args, options)
    scores.append(MetricScore(func=raw["func"], score=float(value)))
    return value


_UNSET = object()


def _call_getter(evaluators: UpstreamEvaluators, env: UpstreamEnv, config: dict[str, Any]) -> Any:
    getter = evaluators.getter(config["type"])
    assert getter is not None  # resolve() checked it
    return getter(env, config)

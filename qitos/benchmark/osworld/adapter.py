"""`qit bench run --benchmark osworld`: the 369 OSWorld computer-use tasks through the QitOS runner.

Data: `--root` (the `osworld` folder or its `evaluation_examples`) or `<data dir>/osworld`. Splits `test_all`
(default, 369 tasks) and `test_small` (39); `--subset chrome,os` keeps domains; task ids are
`osworld-<domain>-<uuid>` (`--task-ids` also accepts `<domain>/<uuid>` or a bare uuid). The evaluator and
setup steps stay on the scoring side (the adapter's gold book holds each example), so they reach the scorer but never the
model or the manifest.

Running needs a desktop: `QITOS_OSWORLD_CONTROLLER=http://<vm-host>:5000` pointing at the in-VM controller of a
running OSWorld VM (comma-separated for several VMs). A VM has one screen, so a controller runs one task at a
time: a task waits in `prepare` until one is free, and `--concurrency` above the number of controllers only
queues (leases are per process). Without a controller the benchmark still loads and validates, and every task
ends `requires_unavailable` with that instruction; so does a task needing Google credentials or a metric,
getter or setup step QitOS does not implement (the reason says which). Setup runs in `prepare` (a failure is
`setup_failed`); downloads are cached by URL under `<data dir>/osworld-cache`, shared by all tasks and runs.

Scoring follows upstream (see `evaluator.py`): score in [0, 1]; `success` is `score == 1.0`. A final answer
instead of a DONE/FAIL action counts as DONE, or as FAIL when it is exactly "FAIL". A task the evaluator
could not score (status `unsupported`/`error`) gets no score and no success; its row says why.

Options (`--option KEY=VALUE`): `observation` = screenshot_a11y_tree (default) | screenshot | a11y_tree,
`settle_seconds` (pause after an action before the next screenshot, default 1), plus the recipe's options
(`qitos/recipes/osworld.py`).
"""

from __future__ import annotations

import os
import re
import threading
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.core.stop import StopReason
from qitos.core.task import Budget, EnvSpec, Task

from ..base import BenchmarkAdapter, Evaluation, LoadOptions, Recipe, Requirement, TaskRuntime, filter_tasks
from ..errors import BenchmarkUsageError
from .controller import ControllerClient
from .engine_env import OBSERVATION_TYPES, OsworldEnv
from .errors import OSWorldError, TaskFormatError
from .evaluator import evaluate
from .getters import HttpDownloader
from .provider import ENV_CONTROLLER, NO_PROVIDER_REASON, discover_provider, readiness, run_setup
from .tasks import SPLITS, Evaluator, OSWorldTask, load_split_index, load_tasks, resolve_examples_dir

if TYPE_CHECKING:
    from qitos.core.engine import RunResult

CACHE_DIR_NAME = "osworld-cache"
_TASK_ID = re.compile(r"^osworld-([a-z0-9_]+)-(.+)$")


def controller_urls() -> list[str]:
    """The controllers named by `QITOS_OSWORLD_CONTROLLER` (comma-separated), in order."""
    return [url.strip() for url in os.environ.get(ENV_CONTROLLER, "").split(",") if url.strip()]


class ControllerLeases:
    """Which controllers are busy: one task per desktop at a time, shared by every job of this process."""

    def __init__(self) -> None:
        self._busy: set[str] = set()
        self._changed = threading.Condition()

    def acquire(self, urls: list[str]) -> str:
        with self._changed:
            while True:
                for url in urls:
                    if url not in self._busy:
                        self._busy.add(url)
                        return url
                self._changed.wait(timeout=1.0)

    def release(self, url: str) -> None:
        with self._changed:
            self._busy.discard(url)
            self._changed.notify_all()

    def busy(self) -> set[str]:
        with self._changed:
            return set(self._busy)


LEASES = ControllerLeases()


def data_root(load: LoadOptions) -> Path:
    return Path(load.root).expanduser() if load.root is not None else Path(load.data_dir) / "osworld"


def _examples(load: LoadOptions) -> Path:
    try:
        return resolve_examples_dir(data_root(load))
    except TaskFormatError as exc:
        raise BenchmarkUsageError(str(exc)) from None


def env_options(options: dict[str, Any]) -> tuple[str, float]:
    """(observation type, settle seconds) from `--option`, with errors that say what is allowed."""
    observation = str(options.get("observation", "screenshot_a11y_tree"))
    if observation not in OBSERVATION_TYPES:
        raise BenchmarkUsageError(f"--option observation={observation}: choose one of {', '.join(OBSERVATION_TYPES)}")
    raw = options.get("settle_seconds", 1.0)
    try:
        settle = float(raw)
    except (TypeError, ValueError):
        raise BenchmarkUsageError(f"--option settle_seconds={raw!r}: expected a number of seconds") from None
    if settle < 0:
        raise BenchmarkUsageError(f"--option settle_seconds={settle}: must be >= 0")
    return observation, settle


def _check_recipe_options(options: dict[str, Any]) -> None:
    """Fail the whole batch up front on a bad recipe option, not every task one by one."""
    from qitos.recipes.osworld import agent_options

    try:
        agent_options(options)
    except ValueError as exc:
        raise BenchmarkUsageError(str(exc)) from None


def to_task(ow: OSWorldTask, split: str) -> Task:
    """An OSWorld example as a QitOS Task; scoring data only in private (`_`) metadata."""
    return Task(
        id=ow.task_id,
        objective=ow.instruction,
        inputs={"action_space": "computer_13"},
        env_spec=EnvSpec(type="osworld_desktop", config={"snapshot": ow.snapshot, "related_apps": ow.related_apps},
                         capabilities=["screenshot", "accessibility_tree", "computer_13"]),
        metadata={
            "benchmark": "osworld", "split": split, "domain": ow.domain, "example_id": ow.id,
            "snapshot": ow.snapshot, "related_apps": ow.related_apps, "source": ow.source,
        },
    )


def agent_view(ow: OSWorldTask) -> OSWorldTask:
    """The example as the env (which the agent reaches) holds it: the evaluator (expected values) left out."""
    return ow.model_copy(update={"evaluator": Evaluator(func="infeasible")})


def domain_of(task_id: str) -> str | None:
    match = _TASK_ID.match(task_id or "")
    return match.group(1) if match else None


def _rate(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class OsworldAdapter(BenchmarkAdapter):
    name = "osworld"
    description = "OSWorld: 369 computer-use tasks on an Ubuntu VM (needs a running VM controller to run)"
    default_split = "test_all"
    default_recipe = "react-computer-use"
    scorer_official = False
    scorer_note = "QitOS's own rewrites of OSWorld's metric functions, not upstream's evaluators"

    # -- discovery -------------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        try:
            examples = resolve_examples_dir(data_root(load))
        except TaskFormatError:
            return {split: None for split in SPLITS}
        return {split: sum(len(ids) for ids in load_split_index(examples, split).values()) for split in SPLITS}

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        try:
            data = Requirement(name="task data", ok=True, detail=str(resolve_examples_dir(data_root(load))))
        except TaskFormatError as exc:
            data = Requirement(name="task data", ok=False, detail=str(exc))
        return [data, self._provider_requirement()]

    @staticmethod
    def _provider_requirement() -> Requirement:
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

    def recipes(self) -> dict[str, Recipe]:
        from qitos.recipes.osworld import build_react_computer_use, build_scripted_actions

        return {
            "react-computer-use": Recipe("react-computer-use", build_react_computer_use,
                                         "screenshot + accessibility tree in, one computer_13 action out (json_decision)"),
            "scripted-actions": Recipe("scripted-actions", build_scripted_actions,
                                       "each model reply is one bare computer_13 action (for scripted:<jsonl> tests)",
                                       official=False),
        }

    # -- tasks -----------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        split = load.split or self.default_split
        if split not in SPLITS:
            raise BenchmarkUsageError(f"osworld has no split '{split}'; choose one of {', '.join(SPLITS)}")
        env_options(load.options)
        _check_recipe_options(load.options)
        domains = [d.strip() for d in load.subset.split(",") if d.strip()] if load.subset else None
        try:
            found = load_tasks(_examples(load), split, domains=domains, ids=load.task_ids)
        except TaskFormatError as exc:
            raise BenchmarkUsageError(str(exc)) from None
        for ow in found:
            self.golds.keep(ow.task_id, ow)
        tasks = [to_task(ow, split) for ow in found]
        return filter_tasks(tasks, load.model_copy(update={"task_ids": None}))

    def default_budget(self) -> Budget:
        return Budget(max_steps=15)  # upstream's default episode length

    # -- one task --------------------------------------------------------------------------------
    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """Readiness, then (holding a controller lease until `cleanup`) the task's setup steps in the VM."""
        ow = self.gold(task)
        observation, settle = env_options(load.options)
        downloader = HttpDownloader(cache_root=Path(load.data_dir) / CACHE_DIR_NAME)
        urls = controller_urls()
        # Readiness does not contact the VM: judge it on the first controller, lease one only if it can run.
        judge = discover_provider({ENV_CONTROLLER: urls[0]}) if urls else None
        try:
            ready = readiness(ow, judge)
        finally:
            _close(judge)
        if ready.status != "ready":
            reason = ready.reason if ready.status == "requires_unavailable" else f"not supported by QitOS: {ready.reason}"
            return TaskRuntime(workdir=workdir, unavailable=reason)
        url = LEASES.acquire(urls)
        provider = discover_provider({ENV_CONTROLLER: url}, downloader=downloader)
        assert provider is not None
        cache_dir = workdir / "osworld"
        try:
            check = getattr(provider, "check", None)
            if callable(check):
                check()  # an unreachable controller fails here, before any setup step
            run_setup(ow, provider, cache_dir)
            env = OsworldEnv(agent_view(ow), provider, observation_type=observation,  # type: ignore[arg-type]
                             settle_seconds=settle)
        except BaseException:
            _close(provider)
            LEASES.release(url)
            raise
        return TaskRuntime(env=env, workdir=workdir, handles={
            "provider": provider, "controller": url, "cache_dir": cache_dir, "downloader": downloader})

    def probe_runtime(self, task: Task, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """What the runner's RunSpec probe needs to build the recipe's agent: the env, but no controller contact,
        lease or setup steps (setup has effects in the VM and would run twice for the batch's first task)."""
        observation, settle = env_options(load.options)
        urls = controller_urls()
        if not urls:
            return TaskRuntime(workdir=workdir, unavailable=NO_PROVIDER_REASON)
        provider = discover_provider({ENV_CONTROLLER: urls[0]})
        assert provider is not None
        env = OsworldEnv(agent_view(self.gold(task)), provider, observation_type=observation,  # type: ignore[arg-type]
                         settle_seconds=settle)
        return TaskRuntime(env=env, workdir=workdir, handles={"provider": provider})

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        env: OsworldEnv | None = runtime.env
        ow = self.gold(task)
        last = env.last_action if env is not None else None
        final_as = None
        if result.stop_reason is StopReason.FINAL:
            final_as = "FAIL" if (result.final_answer or "").strip().upper() == "FAIL" else "DONE"
            last = final_as
        outcome = evaluate(ow, runtime.handles.get("provider"), last, downloader=runtime.handles.get("downloader"),
                           cache_dir=runtime.handles.get("cache_dir"))
        scored = outcome.status == "scored" and outcome.score is not None
        metadata = {
            "domain": ow.domain, "example_id": ow.id, "status": outcome.status, "reason": outcome.reason,
            "metrics": [m.model_dump() for m in outcome.metrics], "last_action": last,
            "actions": len(env.actions) if env is not None else 0, "final_answer_as": final_as,
        }
        return Evaluation(success=outcome.score == 1.0 if scored else None, score=outcome.score if scored else None,
                          prediction=last, metadata=metadata)

    def cleanup(self, runtime: TaskRuntime) -> None:
        """Close the env and the provider, then hand the desktop to the next task (whatever fails)."""
        try:
            try:
                super().cleanup(runtime)
            finally:
                _close(runtime.handles.get("provider"))
        finally:
            if runtime.handles.get("controller"):
                LEASES.release(runtime.handles["controller"])

    # -- aggregation -----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Success rate and mean score over every row (unscored rows count 0, upstream's headline), the
        coverage and the rates over scored rows; per-domain figures; how many rows could not run here."""
        by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_domain[domain_of(row.get("task_id", "")) or "unknown"].append(row)
        out = _summary(rows)
        out["requires_unavailable"] = sum(1 for r in rows if r.get("stop_reason") == StopReason.REQUIRES_UNAVAILABLE.value)
        out["by_domain"] = {d: _summary(group) for d, group in sorted(by_domain.items())}
        return out


def _has_score(row: dict[str, Any]) -> bool:
    return isinstance(row.get("score"), (int, float)) and not isinstance(row.get("score"), bool)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if _has_score(r)]
    return {"rows": len(rows), "scored": len(scored),
            "success_rate": _rate([1.0 if r.get("success") else 0.0 for r in rows]),
            "mean_score": _rate([float(r["score"]) if _has_score(r) else 0.0 for r in rows]),
            "coverage": len(scored) / len(rows) if rows else None,
            "scored_success_rate": _rate([1.0 if r.get("success") else 0.0 for r in scored]),
            "scored_mean_score": _rate([float(r["score"]) for r in scored])}


def _close(provider: Any) -> None:
    close = getattr(provider, "close", None)
    if callable(close):
        close()

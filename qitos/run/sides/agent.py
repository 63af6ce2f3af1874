"""The agent side of one job: build the agent, its model and its environment, run the Engine, return the outcome.

Runs in the agent process (see `zygote.py`), which holds no gold, data dir, results or traces. The
trace is streamed to the scoring side (`StreamWriter`); models that live on the scoring side (the
embedded llama.cpp model, scripted and replay models, which read files the agent must not) are
reached through `ChannelModel`. Everything the agent side says is its own account: the scoring side
decides what is recorded as trusted (see `receiver.py`).
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from qitos.core.engine import Engine, make_run_spec
from qitos.core.stop import StopReason
from qitos.spec.run_spec import AGENT_DESCRIPTION_FIELDS
from qitos.models.base import ModelError, ModelResponse

from qitos.benchmark.base import LoadOptions, Recipe, RecipeContext, TaskRuntime
from qitos.benchmark.contract import AgentJob, AgentOutcome, ScoringLink, safe_relative

AGENT_SPEC_FIELDS = AGENT_DESCRIPTION_FIELDS  # what the agent side may say of its RunSpec; the scoring side sets the rest


class StreamWriter:
    """The agent side's TraceWriter: every call becomes a message to the scoring side, which writes the trace.

    Visual assets (screenshots) are written to a local staging dir by the environment and shipped with
    the step that names them.
    """

    # The scoring side records the run's identity, official checks and task from its own view and keeps only the
    # agent's description from this stream (`receiver.py`): the Engine sends just that (no checks, no fingerprint).
    description_only = True

    def __init__(self, send: Callable[[dict[str, Any]], None], run_id: str, staging: Path) -> None:
        self._send, self.run_id, self.run_dir = send, run_id, staging
        staging.mkdir(parents=True, exist_ok=True)
        self._seq = 0
        self._finalized = False
        self.sync_at_end = False

    def event(self, kind: str, phase: str, payload: dict[str, Any] | None = None, *, step_id: int | None = None,
              ok: bool = True, error: str | None = None) -> int:
        if not self._finalized:
            self._seq += 1
            self._send({"op": "event", "kind": kind, "phase": phase, "payload": payload or {}, "step_id": step_id,
                        "ok": ok, "error": error})
        return self._seq

    def step(self, record: dict[str, Any]) -> None:
        assets = {}
        for asset in record.get("visual_assets") or []:
            rel = str(asset.get("path", ""))
            path = self.run_dir / rel
            if path.is_file():
                assets[rel] = base64.b64encode(path.read_bytes()).decode("ascii")
                path.unlink()
        self._send({"op": "step", "record": record, "assets": assets})

    def update(self, **fields: Any) -> None:
        self._send({"op": "update", "fields": fields})

    def write_manifest(self) -> None:
        self._send({"op": "write_manifest"})

    def integrity(self) -> tuple[bool, str]:
        return True, "streamed to the scoring side, which checks the files it writes"

    def finalize(self, status: str, summary: Any, checks: Any = None, evaluation: Any = None) -> None:
        if self._finalized:
            return
        self._finalized = True
        self._send({"op": "finalize", "status": status, "summary": summary.model_dump(mode="json")})

    @property
    def finalized(self) -> bool:
        return self._finalized


class ChannelModel:
    """The agent side's model: served by the scoring side (an endpoint, the embedded model, scripted, replay), each
    completion one call across. The scoring side holds the client, its key and its connection pool, and counts
    the calls, answers, tokens and cost itself. `named`: an extra endpoint model the agent asked for by name."""

    def __init__(self, link: ScoringLink, name: str, family: str, provider: str, params: dict[str, Any],
                 base_url_host: str | None = None, named: bool = False) -> None:
        self.link, self.name, self.family, self.provider = link, name, family, provider
        self.params, self.base_url_host, self.named = dict(params), base_url_host, named

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 on_event: Callable[[str, dict[str, Any]], None] | None = None, **params: Any) -> ModelResponse:
        request = {"messages": messages, "tools": tools, "params": params}
        if self.named:
            request["model"] = self.name
        reply = self.link.call("model.complete", request)
        for event in reply.get("events") or []:
            if on_event is not None:
                on_event(str(event.get("kind")), dict(event.get("payload") or {}))
        if reply.get("error"):
            if reply.get("time_left_exceeded"):  # the scoring side's call ran into the task's --task-timeout
                from qitos.models.deadline import TimeLeftExceeded

                raise TimeLeftExceeded(str(reply["error"]), working=bool(reply.get("model_working")))
            raise ModelError(str(reply["error"]))
        return ModelResponse.model_validate(reply["response"])


def load_recipe(job: AgentJob) -> Recipe:
    """The recipe or `--runner` callable, imported here on the agent side (never in the scoring process)."""
    if job.runner:
        module, _, attr = job.runner.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        return Recipe(name=f"runner:{job.runner}", build=fn, description="user-supplied agent",
                      needs_model=getattr(fn, "needs_model", True))
    from qitos.benchmark.registry import get_adapter

    return get_adapter(job.benchmark).recipes()[job.recipe or get_adapter(job.benchmark).default_recipe]


def _factory(spec: str) -> Callable[..., Any]:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _model(job: AgentJob, link: ScoringLink, recipe: Recipe):
    if not recipe.needs_model:
        from qitos.models.absent import NoModel

        return NoModel(f"recipe '{recipe.name}'")
    if job.proxied_model is not None:
        return ChannelModel(link, **job.proxied_model)
    key = json.dumps(job.model, sort_keys=True)
    with _MODELS_LOCK:  # one client per model in a process: in batch mode its tasks share the connection pool
        if key not in _MODELS:
            from qitos.run.config import ModelConfig

            _MODELS[key] = ModelConfig.model_validate(job.model).build()
        return _MODELS[key]


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def _runtime(job: AgentJob, workdir: Path, link: ScoringLink) -> TaskRuntime:
    for rel, content in job.files.items():
        target = workdir / safe_relative(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(content))
    handles = dict(job.handles)
    if isinstance(handles.get("files"), list):  # relative to the work dir, which is not always the current dir
        handles["files"] = [str(workdir / safe_relative(str(f))) for f in handles["files"]]
    if job.env is None:
        return TaskRuntime(workdir=workdir, handles=handles)
    runtime = _factory(job.env.factory)(workdir=workdir, link=link, **job.env.kwargs)
    runtime.handles = {**handles, **runtime.handles}
    return runtime


def module_files() -> list[str]:
    """The files of every module this process imported from outside the Python installation and QitOS: the
    agent's import closure as this side sees it. The scoring side does not use it for `code_identified` (nor opens
    any path in it): it identifies the snapshot of the runner's import root it took itself (`code_snapshot`).

    Asked after every job of a long-lived agent process: while `sys.modules` has the same size and the same
    newest entry, nothing was imported or removed since the last answer, which is given again."""
    global _CLOSURE
    try:
        key = (len(sys.modules), next(reversed(sys.modules)))
    except RuntimeError:  # another thread is importing right now
        key = None
    cached = _CLOSURE
    if key is not None and cached is not None and cached[0] == key:
        return list(cached[1])
    installed = _installed_prefixes()
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py") and not path.startswith(installed):
            files.add(path)
    result = sorted(files)
    _CLOSURE = (key, result)
    return list(result)


_CLOSURE: tuple[Any, list[str]] | None = None


@functools.lru_cache(maxsize=1)
def _installed_prefixes() -> tuple[str, ...]:
    import sysconfig

    import qitos

    return tuple({p.rstrip("/") + "/" for p in (sys.prefix, sys.base_prefix, *sysconfig.get_paths().values(),
                                                str(Path(qitos.__file__).parent)) if p})


def describe(agent: Any, model: Any, job: AgentJob) -> dict[str, Any]:
    spec = make_run_spec(agent, model, seed=job.seed, budget=job.task.budget.model_dump(), stop_criteria={},
                         executor=job.executor)
    return spec.model_dump(mode="json", include=set(AGENT_SPEC_FIELDS))


def run_agent_job(job: AgentJob, link: ScoringLink, send: Callable[[dict[str, Any]], None], workdir: Path,
                  cancel: threading.Event) -> AgentOutcome:
    """Build and run one job's agent; the trace goes out through `send`, the outcome is returned."""
    recipe = load_recipe(job)
    runtime = _runtime(job, workdir, link)
    load = LoadOptions(data_dir=workdir / ".no-data", split=job.split, subset=job.subset, variant=job.variant,
                       options=job.options)
    model = _model(job, link, recipe)
    relay = None
    if job.model_relay:  # before the agent is built: a client it makes reads the environment
        from qitos.run.sides.relay import ModelRelay

        relay = ModelRelay(link).start()
    try:
        return _run(job, recipe, runtime, load, model, link, send, workdir, cancel)
    finally:
        if relay is not None:
            relay.close()


def _run(job: AgentJob, recipe: Recipe, runtime: TaskRuntime, load: LoadOptions, model: Any, link: ScoringLink,
         send: Callable[[dict[str, Any]], None], workdir: Path, cancel: threading.Event) -> AgentOutcome:
    ctx = RecipeContext(task=job.task, runtime=runtime, load=load, options=dict(job.options),
                        make_model=lambda name=None: model if name is None else _named_model(job, link, name))
    agent = recipe.build(ctx)
    if job.describe_only:
        _close(runtime)
        return AgentOutcome(stop_reason="described", description=describe(agent, model, job), closure=module_files())
    writer = StreamWriter(send, job.run_id, workdir / ".trace-staging")
    engine = Engine(agent, model, env=runtime.env, run_prefix=job.benchmark, trial=job.trial, seed=job.seed,
                    parse_error_limit=job.parse_error_limit, tool_error_limit=job.tool_error_limit,
                    executor=job.executor, cancel_event=cancel, writer=writer)
    try:
        result = engine.run(job.task)  # takes the environment's final state, then closes it
    finally:
        _close(runtime)
    return AgentOutcome(stop_reason=result.stop_reason.value, final_answer=result.final_answer, steps=result.steps,
                        error=result.error, final_state=result.final_state, closure=module_files())


def _named_model(job: AgentJob, link: ScoringLink, name: str):
    """An extra model the agent asks for by name (e.g. a second endpoint model), with the run's settings; served
    by the scoring side like the first one when that one is."""
    if job.proxied_model is not None:
        return ChannelModel(link, **{**job.proxied_model, "name": name}, named=True)
    from qitos.run.config import ModelConfig

    return ModelConfig.model_validate({**job.model, "model_name": name}).build()


def _close(runtime: TaskRuntime) -> None:
    env = runtime.env
    if env is not None and hasattr(env, "close"):
        try:
            env.close()
        except Exception:  # noqa: BLE001 - closing must not hide the run's outcome
            pass


__all__ = ["AGENT_SPEC_FIELDS", "StreamWriter", "ChannelModel", "run_agent_job", "StopReason"]

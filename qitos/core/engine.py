"""Engine: the one loop every agent and benchmark runs through.

INIT → repeat (DECIDE → ACT → REDUCE → CHECK_STOP) → END. Every exit path (answer, budget,
parse or tool error limits, model failure, Ctrl-C, unexpected exception) ends in exactly one
stop reason and a finalized trace.
"""

from __future__ import annotations

import dataclasses

import hashlib
import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from qitos.models.base import Model, ModelError, ModelResponse, Usage
from qitos.models.deadline import TimeLeftExceeded, task_deadline
from qitos.spec.official import RunFacts, official_checks
from qitos.spec.provenance import environment_summary, package_version, qitos_checkout
from qitos.spec.run_spec import AGENT_DESCRIPTION_FIELDS, ExperimentSpec, RunSpec
from qitos.trace.redact import Redactor
from qitos.trace.schema import RunSummary, TokenUsage
from qitos.trace.writer import TraceWriter, new_run_id

from .agent import ActionResult, AgentModule, AgentState, StepOutcome
from .decision import Decision
from .stop import StopReason, is_disk_full, run_status
from .task import Task


class RunResult(BaseModel):
    run_id: str
    run_dir: str
    status: str
    stop_reason: StopReason
    final_answer: str | None = None
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = 0.0
    latency_seconds: float = 0.0
    error: str | None = None
    run_spec_ref: str | None = None
    official_run: bool = False
    final_state: Any = None  # a benchmark environment's final state as the agent side returned it (for scoring)
    # a stop reason outside the agent that the agent side claimed and the scoring side overruled (sides/evidence.py)
    outside_claim: dict[str, Any] | None = None


def _without_images(message: dict[str, Any]) -> dict[str, Any]:
    """The message with image parts replaced by a placeholder (screenshots belong in visual_assets, not events)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = [{"type": "image_url", "image_url": "[image omitted]"} if isinstance(p, dict) and p.get("type") == "image_url" else p
             for p in content]
    return {**message, "content": parts}


def hash_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def generation_params(agent: AgentModule, model: Model) -> dict[str, Any]:
    """What each agent model call sends: the model's parameters, overridden by the agent's (None: not sent)."""
    from qitos.models.generation import as_sent

    merged = as_sent({**model.params, **(getattr(agent, "model_params", None) or {})})
    return {key: value for key, value in merged.items() if value is not None}


def make_run_spec(agent: AgentModule, model: Model, *, seed: int | None, budget: dict[str, Any],
                  stop_criteria: dict[str, Any], executor: str = "local", **extra: Any) -> RunSpec:
    """The RunSpec of running `agent` on `model`; benchmark fields come in `extra`."""
    sha, dirty = qitos_checkout()
    return RunSpec(
        model_name=model.name, model_family=model.family, model_provider=model.provider,
        base_url_host=getattr(model, "base_url_host", None), generation=generation_params(agent, model),
        prompt_protocol=agent.prompt_protocol, parser_name=agent.parser.name, toolset_name=agent.toolset_name,
        tool_manifest=agent.tools.manifest(), environment=environment_summary(executor), seed=seed,
        stop_criteria=stop_criteria, budget=budget, git_sha=sha, git_dirty=dirty,
        package_version=package_version(), **extra,
    )


class Engine:
    def __init__(
        self,
        agent: AgentModule,
        model: Model,
        *,
        env: Any = None,
        trace_logdir: Path | str = "runs",
        run_prefix: str | None = None,
        trial: int = 0,
        seed: int | None = 0,
        parse_error_limit: int = 3,
        tool_error_limit: int = 5,
        run_spec_extra: dict[str, Any] | None = None,
        experiment_spec: ExperimentSpec | None = None,
        cancel_event: threading.Event | None = None,
        redactor: Redactor | None = None,
        fsync: bool | str = "group",
        executor: str = "local",
        on_step: Callable[[int, RunSummary], None] | None = None,
        on_finish: Callable[[RunResult], dict[str, Any] | None] | None = None,
        durable_finish: bool = True,
        oracle_used: Callable[[], bool] | None = None,
        writer: Any = None,
        isolation: tuple[bool, str] | None = None,
    ) -> None:
        self.agent, self.model, self.env = agent, model, env
        self.trace_logdir = Path(trace_logdir)
        self.run_prefix = run_prefix or agent.name
        self.trial, self.seed = trial, seed
        self.parse_error_limit, self.tool_error_limit = parse_error_limit, tool_error_limit
        self.run_spec_extra = run_spec_extra or {}
        self.experiment_spec = experiment_spec
        self.cancel_event = cancel_event or threading.Event()
        self.redactor = redactor or Redactor()
        self.fsync, self.executor, self.on_step = fsync, executor, on_step
        # on_finish (e.g. a benchmark's evaluation) sees the result before the final manifest is written and
        # returns what to record as its `evaluation`, so the outcome lands in the one final write.
        # durable_finish=False: the caller makes something durable right after (a result row) and that
        # flush covers the trace, so the run's end does not wait for the disk itself; the manifest's final status
        # waits for it too (`trace.writer.seal_trace`).
        self.on_finish, self.durable_finish = on_finish, durable_finish
        # asked at the end: did the agent take gold through the oracle channel (RecipeContext.oracle_gold)?
        self.oracle_used = oracle_used or (lambda: False)
        # a writer made by the caller (e.g. the agent side's stream to the scoring side); one run per Engine then
        self.writer = writer
        self.isolation = isolation  # benchmark runs: the `agent_isolated` check's verdict

    def run_spec(self, task: Task) -> RunSpec:
        return make_run_spec(
            self.agent, self.model, seed=self.seed, budget=task.budget.model_dump(),
            stop_criteria={"parse_error_limit": self.parse_error_limit, "tool_error_limit": self.tool_error_limit},
            executor=self.executor, **self.run_spec_extra)

    # ------------------------------------------------------------------------------------------
    def run(self, task: Task) -> RunResult:
        task.raise_if_invalid()
        spec = self.run_spec(task)
        writer = self.writer or TraceWriter(self.trace_logdir, new_run_id(self.run_prefix, task.id, self.trial),
                                            self.redactor, self.fsync)
        run = _Run(self, task, spec, writer)
        return run.execute()


class _Run:
    """State of one execution of the loop (kept off the Engine so an Engine can run many tasks)."""

    def __init__(self, engine: Engine, task: Task, spec: RunSpec, writer: TraceWriter) -> None:
        self.e, self.task, self.spec, self.w = engine, task, spec, writer
        self.usage = Usage()
        self.cost: float | None = 0.0
        self.steps = 0
        self.model_calls = 0  # requests sent
        self.model_responses = 0  # requests the model answered
        self.parse_errors = 0
        self.tool_errors = 0
        self.started = time.monotonic()
        self.state: AgentState | None = None
        self.final_answer: str | None = None

    def _sink(self, step_id: int | None, phase: str) -> Callable[[str, dict[str, Any]], None]:
        return lambda kind, payload: self.w.event(kind, phase, payload, step_id=step_id, ok=kind != "model_retry")

    def _manifest_start(self) -> None:
        agent, model, task = self.e.agent, self.e.model, self.task
        system = agent.system_prompt(task) or ""
        deterministic = bool(getattr(self.e.env, "deterministic", False))
        description = dict(
            model_id=model.name, model_family=model.family, prompt_protocol=agent.prompt_protocol,
            parser_name=agent.parser.name, prompt_hash=hashlib.sha256(system.encode()).hexdigest()[:16],
            tool_manifest=agent.tools.manifest(), tool_manifest_hash=agent.tools.manifest_hash(),
            replay_mode="deterministic" if deterministic else "best_effort")
        if self._description_only:  # the agent side's stream: the scoring side records the rest itself
            self.w.update(**description, run_spec=self.spec.model_dump(mode="json",
                                                                       include=set(AGENT_DESCRIPTION_FIELDS)))
        else:
            self.w.update(
                **description, seed=self.e.seed, git_sha=self.spec.git_sha, package_version=self.spec.package_version,
                benchmark_name=self.spec.benchmark_name, benchmark_split=self.spec.benchmark_split,
                run_spec={**self.spec.model_dump(mode="json"), "fingerprint": self.spec.fingerprint()},
                experiment_spec=self.e.experiment_spec.model_dump(mode="json") if self.e.experiment_spec else None,
                official_checks=official_checks(self.spec, self.e.experiment_spec, None, self._facts()),
                task=task.public_summary(),
            )
        self.w.write_manifest()

    @property
    def _description_only(self) -> bool:
        """Does the writer keep only the agent's description (`StreamWriter`)? Then this side computes no official
        checks and no fingerprint: the scoring side computes both from its own view."""
        return bool(getattr(self.w, "description_only", False))

    def execute(self) -> RunResult:
        reason: StopReason | None = None
        error: str | None = None
        failure: dict[str, Any] | None = None
        try:
            self._manifest_start()
            self.w.event("run_start", "INIT", {"task_id": self.task.id, "run_spec_ref": None if self._description_only
                                               else self.spec.fingerprint()})  # the scoring side sets its own
            env = self.e.env
            if env is not None and hasattr(env, "bind_events"):
                # environments with their own model calls (e.g. a simulated user) trace them as events
                env.bind_events(lambda kind, payload: self.w.event(kind, "ACT", payload, step_id=self.steps + 1))
            left = self.task.budget.max_runtime_seconds  # model waits count against it (models.deadline)
            with task_deadline(None if left is None else left - (time.monotonic() - self.started)):
                if env is not None and hasattr(env, "reset"):  # e.g. a simulated user's first message: timed too
                    env.reset(self.task)
                self.state = self.e.agent.init_state(self.task)
                while reason is None:
                    reason = self._step()
        except KeyboardInterrupt:
            reason = StopReason.CANCELLED
        except TimeLeftExceeded as exc:  # the time budget ran out while the model was being waited for: the
            # agent's budget when its model has answered in this run or was generating (alive, only slow), the
            # endpoint's failure when it never answered
            answered = self.model_responses or exc.working
            reason, error = (StopReason.BUDGET_TIME if answered else StopReason.MODEL_ERROR), str(exc)
        except ModelError as exc:
            reason, error = StopReason.MODEL_ERROR, str(exc)
            failure = {"type": "ModelError", "message": str(exc)}
        except Exception as exc:  # noqa: BLE001 - any crash must still finalize the trace
            reason = StopReason.DISK_FULL if is_disk_full(exc) else StopReason.ERROR
            error = f"{type(exc).__name__}: {exc}"
            failure = {"type": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}
        return self._finish(reason, error, failure)

    # -- one step ---------------------------------------------------------------------------------
    def _step(self) -> StopReason | None:
        if self.e.cancel_event.is_set():
            return StopReason.CANCELLED
        budget_stop = self._budget_exceeded()
        if budget_stop:
            return budget_stop
        step_id = self.steps + 1
        agent, task, state = self.e.agent, self.task, self.state
        assert state is not None
        outcome = StepOutcome(step_id=step_id)
        model_input_hash = None
        step_started = time.monotonic()

        decision = agent.decide(task, state)  # DECIDE
        if decision is None:
            messages = agent.prepare(task, state)
            tools = agent.tools.openai_schemas() if agent.parser.uses_native_tools else None
            model_input_hash = hash_json([messages, tools])
            self.w.event("model_request", "DECIDE", {
                "messages_hash": model_input_hash, "message_count": len(messages),
                "tool_names": agent.tools.names() if tools else [], "params": generation_params(agent, self.e.model),
                "last_message": _without_images(messages[-1]) if messages else None,
            }, step_id=step_id)
            self.model_calls += 1
            response = self.e.model.complete(messages, tools, on_event=self._sink(step_id, "DECIDE"),
                                             **(getattr(agent, "model_params", None) or {}))
            self.model_responses += 1
            self._account(response)
            outcome.response = response
            self.w.event("model_response", "DECIDE", {
                "text": response.text, "reasoning": response.reasoning,
                "tool_calls": [c.model_dump() for c in response.tool_calls],
                "usage": response.usage.model_dump(), "cost": response.cost, "latency_seconds": response.latency_seconds,
                "model": response.model, "finish_reason": response.finish_reason,
            }, step_id=step_id)
            parse = agent.parser.parse(response)
            outcome.parse = parse
            self.w.event("parse_result", "DECIDE", {"parser": agent.parser.name, "ok": parse.ok,
                                                    "diagnostics": parse.diagnostics}, step_id=step_id, ok=parse.ok)
            decision = parse.decision
        outcome.decision = decision

        if decision is not None and decision.mode == "act":  # ACT
            outcome.results = [self._act(a.name, a.arguments, a.id, step_id) for a in decision.actions]

        self.state = agent.reduce(task, state, outcome)  # REDUCE
        self.steps = step_id
        self._write_step(outcome, model_input_hash, time.monotonic() - step_started)
        return self._check_stop(outcome)  # CHECK_STOP

    def _act(self, name: str, arguments: dict[str, Any], call_id: str | None, step_id: int) -> ActionResult:
        self.w.event("tool_call", "ACT", {"name": name, "arguments": arguments, "call_id": call_id}, step_id=step_id)
        started = time.perf_counter()
        tool = self.e.agent.tools.get(name)
        if tool is None:
            result = ActionResult(name=name, arguments=arguments, call_id=call_id, status="error",
                                  error=f"unknown tool '{name}'; available tools: {', '.join(self.e.agent.tools.names())}")
        else:
            try:
                result = ActionResult(name=name, arguments=arguments, call_id=call_id, output=tool.invoke(arguments))
            except (KeyboardInterrupt, ModelError):
                raise  # Ctrl-C, or a model behind the tool (e.g. a simulated user) that gave up
            except Exception as exc:  # noqa: BLE001 - a failing tool is an observation, not a crash
                result = ActionResult(name=name, arguments=arguments, call_id=call_id, status="error",
                                      error=f"{type(exc).__name__}: {exc}")
        result.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        self.tool_errors = self.tool_errors + 1 if result.status == "error" else 0
        self.w.event("tool_result", "ACT", {"name": name, "status": result.status, "output": result.output,
                                            "latency_ms": result.latency_ms}, step_id=step_id,
                     ok=result.status == "ok", error=result.error)
        return result

    def _write_step(self, outcome: StepOutcome, model_input_hash: str | None, latency: float) -> None:
        response = outcome.response
        parse = outcome.parse
        env_summary = getattr(self.e.env, "step_summary", None)
        visuals = getattr(self.e.env, "take_visual_assets", None)
        record = {
            "step_id": outcome.step_id,
            "observation": [r.observation_text() for r in outcome.results] or None,
            "model_input_hash": model_input_hash,
            "model_response": response.model_dump(exclude={"raw"}) if response else None,
            "decision": outcome.decision.model_dump() if outcome.decision else None,
            "action_results": [r.model_dump() for r in outcome.results],
            "tool_invocations": [{"name": r.name, "arguments": r.arguments, "status": r.status,
                                  "latency_ms": r.latency_ms, "error": r.error} for r in outcome.results],
            "parser": {"name": self.e.agent.parser.name, "ok": parse.ok, "diagnostics": parse.diagnostics} if parse else None,
            "usage": response.usage.model_dump() if response else TokenUsage().model_dump(),
            "cost": response.cost if response else 0.0,
            "latency_seconds": round(latency, 6),
            "state_diff": env_summary() if callable(env_summary) else None,
            "visual_assets": visuals(self.w.run_dir) if callable(visuals) else [],
        }
        self.w.step(record)
        if self.e.on_step:
            self.e.on_step(outcome.step_id, self._summary(None))

    def _check_stop(self, outcome: StepOutcome) -> StopReason | None:
        decision, parse = outcome.decision, outcome.parse
        if parse is not None and not parse.ok:
            self.parse_errors += 1
            if self.parse_errors >= self.e.parse_error_limit:
                return StopReason.PARSE_ERROR_LIMIT
        elif parse is not None:
            self.parse_errors = 0
        if decision is not None and decision.mode == "final":
            self.final_answer = decision.final_answer
            return StopReason.FINAL
        if self.e.env is not None and getattr(self.e.env, "is_terminal", lambda: False)():
            return StopReason.ENV_TERMINAL
        if self.tool_errors >= self.e.tool_error_limit:
            return StopReason.TOOL_ERROR_LIMIT
        budget = self.task.budget
        if budget.max_steps is not None and self.steps >= budget.max_steps:
            return StopReason.BUDGET_STEPS
        return self._budget_exceeded()

    def _budget_exceeded(self) -> StopReason | None:
        b = self.task.budget
        if b.max_runtime_seconds is not None and time.monotonic() - self.started >= b.max_runtime_seconds:
            return StopReason.BUDGET_TIME
        if b.max_tokens is not None and self.usage.total_tokens >= b.max_tokens:
            return StopReason.BUDGET_TOKENS
        if b.max_cost is not None and self.cost is not None and self.cost >= b.max_cost:
            return StopReason.BUDGET_COST
        return None

    def _account(self, response: ModelResponse) -> None:
        self.usage = self.usage + response.usage
        self.cost = None if (self.cost is None or response.cost is None) else self.cost + response.cost

    # -- end --------------------------------------------------------------------------------------
    def _facts(self) -> RunFacts:
        return RunFacts(model_calls=self.model_calls, model_responses=self.model_responses, oracle_used=bool(self.e.oracle_used()), isolation=self.e.isolation)

    def _summary(self, reason: StopReason | None, failure: dict[str, Any] | None = None) -> RunSummary:
        final = self.final_answer
        if final is None and self.state is not None:
            final = self.state.final_answer
        return RunSummary(
            stop_reason=reason.value if reason else None, final_result=final, steps=self.steps,
            token_usage=TokenUsage(**self.usage.model_dump()), latency_seconds=round(time.monotonic() - self.started, 6),
            cost=self.cost, failure_report=failure,
        )

    def _finish(self, reason: StopReason, error: str | None, failure: dict[str, Any] | None) -> RunResult:
        summary = self._summary(reason, failure)
        try:
            self.w.event("stop", "CHECK_STOP", {"stop_reason": reason.value}, ok=reason not in (StopReason.ERROR, StopReason.MODEL_ERROR))
            self.w.event("run_end", "END", {"status": run_status(reason), "steps": self.steps}, error=error)
        finally:
            env = self.e.env
            final_state = None
            if env is not None and hasattr(env, "final_state"):  # what the scoring side scores, taken before close
                try:
                    final_state = env.final_state()
                except Exception as exc:  # noqa: BLE001 - recorded; the evaluator decides what a missing state means
                    final_state = {"final_state_error": f"{type(exc).__name__}: {exc}"}
            if env is not None and hasattr(env, "close"):
                try:
                    env.close()
                except Exception:  # noqa: BLE001 - cleanup must not mask the run's outcome
                    pass
            checks = None if self._description_only else official_checks(
                self.spec, self.e.experiment_spec, self.w.integrity(),
                dataclasses.replace(self._facts(), stop_reason=reason.value))
            result = RunResult(
                run_id=self.w.run_id, run_dir=str(self.w.run_dir), status=run_status(reason), stop_reason=reason,
                final_answer=summary.final_result, steps=self.steps, usage=self.usage, cost=self.cost,
                latency_seconds=summary.latency_seconds, error=error,
                run_spec_ref=None if checks is None else self.spec.fingerprint(),
                official_run=checks is not None and all(c.passed for c in checks), final_state=final_state,
            )
            evaluation, hook_error = None, None
            if self.e.on_finish is not None:
                try:
                    evaluation = self.e.on_finish(result)
                except BaseException as exc:  # noqa: BLE001 - the trace is finalized first, then it propagates
                    hook_error = exc
            self.w.sync_at_end = self.e.durable_finish
            if not self.e.durable_finish:
                self.w.hold_status = True  # the caller seals it once its row is durable (seal_trace)
            self.w.finalize(run_status(reason), summary, checks, evaluation)
            if hook_error is not None:
                raise hook_error
        return result

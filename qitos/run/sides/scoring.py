"""The scoring side of one job: send the task to a fresh agent child, write what it streams, answer its calls
(the job's socket is read by one thread for every job, `hub.py`).

The agent child gets the task without gold, its input files as bytes and its public handles. Its
stream becomes the trace (through `TraceReceiver`); its calls are answered here: completions of a
model that lives on this side, and `adapter.serve` for what the benchmark keeps out of the agent's
reach. The returned outcome (answer, the environment's final state) is what the adapter scores.
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.core.engine import RunResult
from qitos.core.stop import StopReason, is_disk_full, run_status
from qitos.core.task import Task
from qitos.models.base import ModelError, Usage
from qitos.models.deadline import TimeLeftExceeded, task_deadline
from qitos.spec.official import RunFacts, official_checks
from qitos.trace.schema import RunSummary, TokenUsage
from qitos.trace.writer import TraceWriter, new_run_id

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.contract import AgentCallRefused, AgentJob, AgentOutcome
from qitos.run.sides import bookkeeping
from qitos.run.sides.forwarder import ModelCall, forward, forwarded_on_loop
from qitos.run.sides.evidence import CLAIM_KEY, OutsideEvidence, lowered_by_agent, observed_factory, process_end, relay_failed
from qitos.run.sides.host import START_TIMEOUT_SECONDS
from qitos.run.sides.hub import CALL, HUB
from qitos.run.sides.limits import STOP_REASONS
from qitos.run.sides.model_calls import MODEL_CALLS
from qitos.run.sides.trusted_spec import trusted_run_spec
from qitos.run.sides.receiver import AssetQuotaExceeded, StreamError, TraceReceiver
from qitos.run.sides.watch import TaskWatch, read_hello
from qitos.run.sides.wire import WireClosed

if TYPE_CHECKING:
    from qitos.run.job_context import JobContext


PROCESS_END_WAIT_SECONDS = 5.0  # for the host's report of how a job's process ended, after its socket closed
CANCEL_GRACE_SECONDS = 30.0  # after a cancel, how long the agent side may take to end its run
DEADLINE_GRACE_SECONDS = 120.0  # beyond the task's own time budget, before the scoring side gives up
# a --runner's own client in --agent-processes batch: not relayed (tasks share one process and its environment,
# so a call could not be told apart by task), hence not counted (docs/security.md)
UNCOUNTED_BATCH_CLIENT = ("calls of the --runner's own OpenAI client were not counted: in --agent-processes batch it "
                          "is not relayed through the scoring side (run with --agent-processes task to count them)")


def agent_job(ctx: "JobContext", task: Task, trial: int, runtime: TaskRuntime | None, run_id: str,
              describe_only: bool = False) -> AgentJob:
    cfg, adapter = ctx.cfg, ctx.adapter
    spec = adapter.agent_env(task, runtime) if runtime is not None else None
    files = {**adapter.agent_files(task, runtime), **(spec.files if spec else {})} if runtime is not None else {}
    shipped = {rel: base64.b64encode(Path(host).read_bytes()).decode("ascii") for rel, host in files.items()}
    proxied = None
    if ctx.model_is_proxied():
        model = ctx.probe_model()
        proxied = {"name": model.name, "family": model.family, "provider": model.provider,
                   "params": dict(model.params), "base_url_host": getattr(model, "base_url_host", None)}
    return AgentJob(
        run_id=run_id, task=task.model_copy(update={"metadata": task.public_summary()["metadata"]}), trial=trial,
        benchmark=cfg.benchmark, split=cfg.load.split, subset=cfg.load.subset, variant=cfg.load.variant,
        recipe=None if cfg.runner else ctx.recipe.name, runner=cfg.runner, options=cfg.recipe_options(),
        model={} if proxied else cfg.model.model_dump(mode="json"), proxied_model=proxied, env=spec,
        handles=adapter.agent_handles(task, runtime) if runtime is not None else {}, files=shipped,
        parse_error_limit=cfg.parse_error_limit, tool_error_limit=cfg.tool_error_limit, seed=cfg.model.seed,
        executor=cfg.executor, describe_only=describe_only, model_relay=ctx.model_relayed())


class _Job:
    """One job's conversation with its agent child."""

    def __init__(self, ctx: "JobContext", task: Task, runtime: TaskRuntime | None,
                 receiver: TraceReceiver | None) -> None:
        self.ctx, self.task, self.runtime, self.receiver = ctx, task, runtime, receiver
        self.model = ctx.job_model() if ctx.model_is_proxied() else None
        self.model_calls = 0  # completions the agent asked the scoring side for
        self.model_responses = 0  # those the model answered
        self.usage, self.cost = Usage(), 0.0  # of the answers, as the model reported them to this side
        self.lock = threading.Lock()  # the trace and the counts, written by this job's loop and its model calls
        self.started: float | None = None  # when the job was sent: forwarded calls get the task's time left
        self.evidence = OutsideEvidence(task.budget.max_runtime_seconds)  # what this side saw fail (evidence.py)
        self.claim: dict[str, Any] | None = None  # an outcome the agent side claimed and this side overruled
        self.watch: TaskWatch | None = None  # the job's processes' limits (watch.py)
        self.channel: Any = None  # the job's socket, once open

    def converse(self, job: AgentJob) -> AgentOutcome:
        host = self.ctx.agent_host()
        channel = host.open_job()
        watch = None
        try:
            try:
                pid = read_hello(channel.sock, START_TIMEOUT_SECONDS)
            except (OSError, ConnectionError) as exc:
                raise WireClosed(str(exc)) from None
            watch = self.watch = TaskWatch(pid, self.ctx.cfg.limits, per_task=host.mode != "batch",
                                           private_world=host.mode == "task")
            job.limits = watch.job_limits()
            self.channel = channel
            self.started = time.monotonic()
            channel.send({"t": "job", "job": job.model_dump(mode="json")})
            budget = self.task.budget.max_runtime_seconds
            self.deadline = time.monotonic() + budget + DEADLINE_GRACE_SECONDS if budget else None
            # the hub reads the socket (hub.py); a benchmark's service call is answered here, on this thread
            return HUB.converse(channel, self, lambda call: channel.send(self._answer(call)))
        except (WireClosed, ConnectionError) as exc:  # ... or a send to a socket its process closed (broken pipe)
            if watch is not None and watch.check(force=True):  # the task was ended by (or at) a limit
                return self._limit_outcome(watch)
            if self.ctx.cancel_event.is_set():  # the run was being cancelled: no row, a rerun does it again
                return AgentOutcome(stop_reason=StopReason.CANCELLED.value)
            return self._process_end(host, channel, watch, exc)
        finally:
            if watch is not None:
                watch.close()
            channel.close()

    deadline: float | None = None  # past it, the scoring side gives up on the agent side (its budget + a grace)
    cancelled_at: float | None = None  # when the cancel was sent

    def on_tick(self, now: float) -> AgentOutcome | None:
        """Between messages (the hub's thread): a limit reached, the run cancelled, the deadline passed."""
        if self.watch.check(now):
            return self._limit_outcome(self.watch)
        if self.ctx.cancel_event.is_set() and self.cancelled_at is None:
            self.cancelled_at = now  # sent by a model-call thread: the hub never writes to a job's socket
            MODEL_CALLS.submit(lambda: {"t": "cancel"}, self.channel.send)
        if self.cancelled_at is not None and now - self.cancelled_at > CANCEL_GRACE_SECONDS:
            return AgentOutcome(stop_reason=StopReason.CANCELLED.value)
        if self.deadline is not None and now > self.deadline:
            return AgentOutcome(stop_reason=StopReason.BUDGET_TIME.value,
                                error="the agent side did not end its run within its time budget")
        return None

    def on_message(self, message: dict[str, Any], now: float) -> Any:
        """One message from the agent side (the hub's thread): the stream it carries applied first, then a model
        call forwarded on the hub's loop (`forward`) or handed to the model-call threads, any other call to this
        job's thread (`CALL`), the outcome returned."""
        if self.watch.check(now):
            return self._limit_outcome(self.watch)
        kind, ops = message.get("t"), message.get("ops")
        if kind in ("ops", "call", "done") and ops and self.receiver is not None:
            # a call or the outcome carries the trace up to it (link._Outbox): written (one write per file) before
            # it is answered; with the outcome, the manifest is left to the final one `finish` writes next
            with self.lock, self.receiver.w.held(manifest_follows=kind == "done"):
                for op in ops:
                    self.receiver.apply(op if isinstance(op, dict) else {})
        if kind == "ops" and self.receiver is not None:
            return None
        if kind == "call" and str(message.get("method")).startswith("model.") and self.model is not None:
            if forwarded_on_loop(self.model, message):
                HUB.spawn(forward(self, message))
            else:
                MODEL_CALLS.submit(lambda call=message: self._answer(call), self.channel.send)
            return None
        if kind == "call":
            return CALL
        if kind == "done":
            if self.watch.check(force=True):  # a limit reached on the way (a subprocess the OOM killer ended)
                return self._limit_outcome(self.watch)
            outcome = AgentOutcome.model_validate(message.get("outcome") or {})
            self.claim = self.evidence.vet(outcome, self.ctx.cancel_event.is_set())  # its word, checked
            return outcome
        raise StreamError(f"unexpected message {kind!r} from the agent side")

    def _process_end(self, host: Any, channel: Any, watch: TaskWatch | None, exc: BaseException) -> AgentOutcome:
        """The socket closed without an outcome: how the job's process ended decides whose failure it is
        (`evidence.process_end`): outside (unscored, run again) only for a death the agent could not cause."""
        job = getattr(channel, "job", None)
        end = host.ended(job, PROCESS_END_WAIT_SECONDS) if job is not None and hasattr(host, "ended") else None
        running = end is None and watch is not None and watch.running()
        reason, error, metadata = process_end(end, running)
        if reason == StopReason.ERROR.value:
            self.claim = metadata  # kept in the row's metadata and the trace's failure report
        return AgentOutcome(stop_reason=reason, error=f"{error} ({exc})")

    def _limit_outcome(self, watch: TaskWatch) -> AgentOutcome:
        hit = str(watch.hit)
        label = STOP_REASONS[hit].replace("_", " ")  # "process limit", "cpu time limit", ...
        return AgentOutcome(stop_reason=STOP_REASONS[hit], error=f"the task's agent processes reached their "
                            f"{label} ({watch.limits.describe(hit)}): the task was ended")

    def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        call_id, method = message.get("id"), str(message.get("method"))
        payload = message.get("payload") if isinstance(message.get("payload"), dict) else {}
        try:
            if method == "model.complete":
                value = self._complete(payload)
            elif method == "model.http":
                value = self._relay(payload)
            elif self.runtime is None:
                raise AgentCallRefused(f"no scoring-side service '{method}' while describing the agent")
            else:  # a service's own model calls (a simulated user's) get at most the task's time left too
                with task_deadline(self._time_left()):
                    value = self.ctx.adapter.serve(self.task, self.runtime, method, payload)
            return {"t": "reply", "id": call_id, "ok": True, "value": value}
        except Exception as exc:  # noqa: BLE001 - a failing service is the agent's observation, not a crash here
            return self.reply_refused(call_id, exc)

    def _complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Call the model for the agent side and count the call, its answer, tokens and cost here: these, not the
        agent side's streamed events, are the run's model facts. Each call is also written to the trace by this
        side (a `model_call` event after the agent side's `model_request`). `forwarder.forward` does the same on
        the hub's loop."""
        call = self.model_call(payload)
        try:
            with task_deadline(call.given):  # --task-timeout bounds the wait (models/deadline.py)
                response = call.model.complete(call.messages, call.tools, on_event=call.on_event, **call.params)
        except ModelError as exc:
            return self.call_failed(call, exc)
        return self.call_answered(call, response)

    def model_call(self, payload: dict[str, Any]) -> "ModelCall":
        """A model call the agent side asked for, checked and counted (not made yet)."""
        if self.model is None:
            raise AgentCallRefused("the agent's model is not served by the scoring side")
        name = payload.get("model")
        model = self.ctx.named_model(str(name)) if name and name != self.model.name else self.model
        params = payload.get("params") if isinstance(payload.get("params"), dict) else {}
        messages, tools = payload.get("messages"), payload.get("tools")
        if not isinstance(messages, list) or not (tools is None or isinstance(tools, list)):
            raise AgentCallRefused("model.complete takes a list of messages and a list of tools (or none)")
        with self.lock:
            self.model_calls += 1
        return ModelCall(model, name, messages, tools, params, self._time_left())

    def call_failed(self, call: "ModelCall", exc: ModelError) -> dict[str, Any]:
        self._record({"model": call.model.name, "ok": False, "error": str(exc)[:300]})
        chose = lowered_by_agent(call.model, call.params) or (
            f"the agent named model '{call.name}'" if call.model is not self.model else None)
        self.evidence.failed_call(exc, given=call.given, request_timeout=getattr(call.model, "request_timeout", None),
                                  agent_chose=chose)
        return {"error": str(exc), "events": call.events, "time_left_exceeded": isinstance(exc, TimeLeftExceeded),
                "model_working": bool(getattr(exc, "working", False))}

    def call_answered(self, call: "ModelCall", response: Any) -> dict[str, Any]:
        self._answered(response, call.model.name)
        return {"response": response.model_dump(mode="json"), "events": call.events}  # `raw` too: recipes echo it

    def reply_refused(self, call_id: Any, exc: Exception) -> dict[str, Any]:
        """A call that failed on this side, as the agent side's observation (never a crash here)."""
        if isinstance(exc, AgentCallRefused):
            return {"t": "reply", "id": call_id, "ok": False, "error": str(exc)}
        if is_disk_full(exc):  # this side's own write (the trace, a service's files): the job ends disk_full
            self.evidence.disk_full = f"{type(exc).__name__}: {exc}"
        return {"t": "reply", "id": call_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def _time_left(self) -> float | None:
        """Seconds left of the task's own time budget, by this side's clock (None: no budget)."""
        budget = self.task.budget.max_runtime_seconds
        if budget is None or self.started is None:
            return None
        return budget - (time.monotonic() - self.started)

    def _relay(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A `--runner`'s own client's request (`relay.py`), sent to the endpoint as it is with this side's key
        and client; counted like `_complete`. The endpoint's reply (or error) goes back as it is."""
        if self.model is None or not self.ctx.model_relayed():
            raise AgentCallRefused("this run relays no model calls")
        body = payload.get("body")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise AgentCallRefused("a chat completion request needs a list of messages")
        if body.get("stream"):
            raise AgentCallRefused("streamed completions are not relayed: call with stream=False")
        with self.lock:
            self.model_calls += 1
        started, left = time.perf_counter(), self._time_left()
        try:
            raw = self.model._create(body, None if left is None else max(0.1, left))  # within --task-timeout
        except Exception as exc:  # noqa: BLE001 - the endpoint's failure is the agent's observation
            status, answer = getattr(exc, "status_code", None), getattr(exc, "response", None)
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            self._record({"model": str(body.get("model")), "ok": False, "error": error})
            self.evidence.failed_call(exc, given=left, request_timeout=getattr(self.model, "request_timeout", None),
                                      agent_chose=None if relay_failed(exc) else "the endpoint refused the request")
            return {"status": status or 502,
                    "body": answer.text if answer is not None else {"error": {"message": error}}}
        self._answered(self.model._to_response(raw, time.perf_counter() - started, 1), str(body.get("model")))
        return {"status": 200, "body": raw}

    def _answered(self, response: Any, name: str) -> None:
        self.evidence.answered_call()
        with self.lock:
            self.model_responses += 1
            self.usage = self.usage + response.usage
            self.cost = None if (self.cost is None or response.cost is None) else self.cost + response.cost
        self._record({"model": response.model or name, "ok": True, "usage": response.usage.model_dump(),
                      "cost": response.cost, "latency_seconds": response.latency_seconds,
                      "attempt": response.attempt})

    def _record(self, payload: dict[str, Any]) -> None:
        if self.receiver is not None:
            with self.lock:
                self.receiver.w.event("model_call", "DECIDE", {**payload, "calls": self.model_calls,
                                                              "answered": self.model_responses},
                                      ok=bool(payload.get("ok")), error=payload.get("error"))


def describe_agent(ctx: "JobContext", task: Task, runtime: TaskRuntime | None) -> AgentOutcome:
    """Build the agent for `task` on the agent side without running it: what it says it is (for the RunSpec)."""
    job = agent_job(ctx, task, 0, runtime, run_id="describe", describe_only=True)
    return _Job(ctx, task, runtime, None).converse(job)


def run_split(ctx: "JobContext", task: Task, trial: int, runtime: TaskRuntime, trace_logdir: Path,
              verdict: Any) -> RunResult:
    """Run one job across the boundary; `verdict` (the adapter's evaluation) sees the result before the final write."""
    with bookkeeping.BOOKKEEPING:  # one slot at a time beside the hub (bookkeeping.py)
        writer = TraceWriter(trace_logdir, new_run_id(ctx.cfg.benchmark, task.id, trial))
        writer.sync_at_end = False  # the result row's flush, right after, covers the trace
        writer.hold_status = True  # and the final status waits for the row (`seal_trace`)
        reserved = frozenset(getattr(ctx.adapter, "scoring_event_kinds", ()))
        receiver = TraceReceiver(writer, lambda d: trusted_run_spec(ctx, task, d), ctx.experiment,
                                 task.public_summary(), reserved=reserved, limits=ctx.cfg.limits)
        conversation = _Job(ctx, task, runtime, receiver)

    def trace_event(kind: str, payload: dict[str, Any]) -> None:  # scoring-side services' events (their threads)
        with conversation.lock:
            writer.event(kind, "ACT", payload)

    runtime.trace_event = trace_event
    runtime.make_model = observed_factory(runtime.make_model, conversation.evidence)  # their failures: evidence
    started = time.monotonic()
    try:
        with bookkeeping.BOOKKEEPING:
            job = agent_job(ctx, task, trial, runtime, writer.run_id)
        outcome = conversation.converse(job)
    except AssetQuotaExceeded as exc:
        outcome = AgentOutcome(stop_reason=StopReason.ASSET_QUOTA.value, error=str(exc))
    except StreamError as exc:
        outcome = AgentOutcome(stop_reason=StopReason.ERROR.value, error=str(exc))
    except Exception as exc:  # this side's own write of the trace found the disk full
        if not is_disk_full(exc):
            raise
        outcome = AgentOutcome(stop_reason=StopReason.DISK_FULL.value, error=f"{type(exc).__name__}: {exc}")
    try:
        reason = StopReason(outcome.stop_reason)
    except ValueError:
        reason, outcome.error = StopReason.ERROR, f"the agent side reported an unknown stop reason {outcome.stop_reason!r}"
    summary = receiver.final[1] if receiver.final else RunSummary()
    status = run_status(reason)  # from the stop reason, whatever status the agent side wrote
    report = summary.failure_report or outcome.failure or ({"message": outcome.error} if outcome.error else None)
    if conversation.claim is not None:  # the agent side's claimed end, overruled: say so, not what it wrote
        kind = "ClaimOverruled" if CLAIM_KEY in conversation.claim else "AgentProcessEnded"
        report = {"type": kind, "message": outcome.error, **conversation.claim}
    summary = summary.model_copy(update={"stop_reason": reason.value, "failure_report": report})
    if ctx.model_is_proxied():  # tokens and cost of the calls this side made, whatever the agent side counted
        summary.token_usage = TokenUsage(**conversation.usage.model_dump())
        summary.cost = conversation.cost
    if summary.latency_seconds == 0:
        summary.latency_seconds = round(time.monotonic() - started, 6)
    if receiver.spec is None:
        receiver.spec = trusted_run_spec(ctx, task, outcome.description or {})
    # a model this side serves: its own counts; otherwise (a recipe that calls no model) the streamed events
    calls, answered = ((conversation.model_calls, conversation.model_responses) if ctx.model_is_proxied()
                       else (max(receiver.model_requests, receiver.model_responses), receiver.model_responses))
    usage = Usage(**summary.token_usage.model_dump())
    result = RunResult(run_id=writer.run_id, run_dir=str(writer.run_dir), status=run_status(reason), stop_reason=reason,
                       final_answer=outcome.final_answer if outcome.final_answer is not None else summary.final_result,
                       steps=outcome.steps or summary.steps, usage=usage, cost=summary.cost,
                       latency_seconds=summary.latency_seconds, error=outcome.error,
                       run_spec_ref=receiver.spec.fingerprint(), final_state=outcome.final_state,
                       outside_claim=conversation.claim)
    evaluation = verdict(result) if reason is not StopReason.CANCELLED else None
    with bookkeeping.BOOKKEEPING:
        ctx.record_closure(writer.run_dir)  # the snapshot's sources; never the closure the agent side reports
        uncounted = UNCOUNTED_BATCH_CLIENT if ctx.runner_brings_client() and not ctx.model_relayed() else None
        facts = RunFacts(model_calls=calls, model_responses=answered, isolation=ctx.isolation(),
                         stop_reason=reason.value, uncounted=uncounted,
                         scorer_isolation=getattr(getattr(verdict, "evaluation", None), "scorer_isolation", None))
        checks = official_checks(receiver.spec, ctx.experiment, writer.integrity(), facts)
        with conversation.lock:  # a model call still in flight (cancelled, past the deadline) writes nothing after
            receiver.finish(status, summary, checks, evaluation)
    result.official_run = all(c.passed for c in checks)
    return result

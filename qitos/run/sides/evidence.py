"""Outside-the-agent failures are the scoring side's own observations, never the agent side's word.

A row that ends outside the agent (`qitos.core.stop.OUTSIDE_AGENT`) is unscored and run again by a plain rerun,
so an agent able to end its run that way could re-roll every task it is failing until it passes (inflating pass
rates, breaking pass^k). The agent side (a recipe or a third-party `--runner`) reports its run's end, and it may
name only what its own code decides (`AGENT_REPORTS`); everything else is the scoring side's to say:

- `model_error` stands only when this side's forwarder saw the endpoint fail for this job: the last forwarded
  call (the agent's, its relayed client's, or a scoring-side service's model such as Tau-Bench's simulated user)
  ended in an endpoint failure (`ModelError.endpoint`: 5xx/429/408 after the run's retries, a timeout, a cut or
  empty reply, the run's key or model refused) with none answered after it; or a call ran into the task's
  deadline while it had at least half the task's time (or its request timeout) and no call of the job had been
  answered. A request the endpoint refused (another 4xx), a call with retries or timeout lowered by the agent, a
  model the agent named itself: the agent's failure.
- `agent_process_died`, `worker_died`, `node_lost`, `setup_failed`, `disk_full`, a limit, `cancelled`,
  `requires_unavailable`, `not_executed`: made only by the scoring side from what it saw (the job's socket closing
  without an outcome, a worker's exit, its own setup and writes, the task's limits, its own cancel), never taken
  from an outcome the agent side sends.

An outcome naming a reason it may not, or one this side did not see, becomes `error` (scored by the benchmark's
scorer like any run that ended `error`: on the answer it gave, if any) and the row's metadata keeps what was claimed
(`claimed_stop_reason`).

A job whose socket closes without an outcome is judged by how its process ended, as the agent host saw it
reaping it (`process_end`; the host runs no agent code and no job can signal, trace or read it):
`agent_process_died` only for death by SIGKILL, SIGTERM, SIGINT or SIGHUP, which the signal guard
(`signal_guard.py`) lets no agent process send to its own task's agent process, the host or the sandbox's
init, so only the outside sends them (the OOM killer, an operator, a dying worker); and when the host itself is
gone (killed from outside: the guard covers it too). Any other end is the agent's own failure, scored `error`
with what happened in the row's metadata (`agent_process_end`): a fault it raised (SIGSEGV, SIGBUS, SIGABRT,
SIGILL, SIGFPE, SIGSYS from the guard), any other signal it sent itself, an exit on its own, or its process
still running after it closed its connection. Left open: on a kernel without Landlock's signal scope (before
6.12), an agent process can signal a sibling task's in `--agent-processes task` (which that sibling's row
shows as `agent_process_died`, run again), and a SIGKILL from the system's OOM killer where no memory cgroup
bounds the task is taken as outside (see docs/security.md).
"""

from __future__ import annotations

import threading
from typing import Any

from qitos.core.stop import StopReason
from qitos.models.base import ModelError
from qitos.models.deadline import TimeLeftExceeded

CLAIM_KEY = "claimed_stop_reason"
# how the agent side's own code may say its run ended (its engine's reasons); `described`: a describe-only job
AGENT_REPORTS = frozenset({StopReason.FINAL.value, StopReason.ENV_TERMINAL.value, StopReason.BUDGET_STEPS.value,
                           StopReason.BUDGET_TIME.value, StopReason.BUDGET_TOKENS.value, StopReason.BUDGET_COST.value,
                           StopReason.PARSE_ERROR_LIMIT.value, StopReason.TOOL_ERROR_LIMIT.value,
                           StopReason.ERROR.value, "described"})


class OutsideEvidence:
    """What this side saw of one job's model calls and its own writes; `vet` judges the agent side's outcome."""

    def __init__(self, budget_seconds: float | None = None) -> None:
        self.budget = budget_seconds
        self.lock = threading.Lock()
        self.endpoint_failure: str | None = None  # the last forwarded call's endpoint failure, if nothing since
        self.answered = 0
        self.disk_full: str | None = None  # a write of this side's that found the disk full

    def answered_call(self, counted: bool = True) -> None:
        """A call answered; `counted`: the agent's own (a service's answer does not say the agent's model works)."""
        with self.lock:
            self.answered += 1 if counted else 0
            self.endpoint_failure = None

    def failed_call(self, exc: BaseException, *, given: float | None = None, request_timeout: float | None = None,
                    agent_chose: str | None = None) -> None:
        """A forwarded call failed. `given`: the seconds of task time it had; `agent_chose`: why its failure is the
        agent's own (it lowered the retries or timeout, named the model), if so."""
        why = None if agent_chose else endpoint_failed(exc, given, self.budget, request_timeout)
        with self.lock:
            if why is not None and not (isinstance(exc, TimeLeftExceeded) and self.answered):
                self.endpoint_failure = f"{why}: {str(exc)[:300]}"
            else:
                self.endpoint_failure = None

    def vet(self, outcome: Any, cancelled: bool) -> dict[str, Any] | None:
        """Rewrite the agent side's `outcome` (an AgentOutcome) to what this side can stand behind; the claim it
        overruled (for the row's metadata and the trace), or None."""
        claimed = str(outcome.stop_reason)
        if self.disk_full is not None:  # this side's own write failed: that is how the job ended
            outcome.stop_reason, outcome.error = StopReason.DISK_FULL.value, self.disk_full
            return None
        if claimed in AGENT_REPORTS or (claimed == StopReason.CANCELLED.value and cancelled):
            return None
        if claimed == StopReason.MODEL_ERROR.value and self.endpoint_failure is not None:
            return None
        why = ("no model endpoint failure was seen by the scoring side's forwarder for this task"
               if claimed == StopReason.MODEL_ERROR.value else
               "only the scoring side may end a task this way, from what it saw itself")
        claim = {CLAIM_KEY: claimed, "claimed_error": (outcome.error or "")[:500] or None}
        outcome.stop_reason = StopReason.ERROR.value
        outcome.error = (f"the agent side ended its run '{claimed}', which the scoring side did not see ({why}): "
                         f"scored as the agent's error" + (f"; it said: {outcome.error}" if outcome.error else ""))
        outcome.failure = None
        return claim


def process_end(end: dict | None, running: bool) -> tuple[str, str, dict[str, Any]]:
    """(stop reason, error, metadata) of a job whose socket closed without an outcome. `end`: the host's report
    of how its process ended (`AgentHost.ended`), None when the host is gone or said nothing; `running`: the
    job's process is still there (it closed its connection itself)."""
    import signal as signals

    from qitos.run.sides.signal_guard import OUTSIDE_SIGNALS

    if end is None and running:
        what = "its process closed its connection to the scoring side and went on running"
    elif end is None:
        return (StopReason.AGENT_PROCESS_DIED.value, "the agent host ended (killed from outside) before the task "
                "reported an outcome", {})
    elif end.get("signal") is not None:
        number = int(end["signal"])
        try:
            name = signals.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        if number in OUTSIDE_SIGNALS:
            return (StopReason.AGENT_PROCESS_DIED.value, f"the agent's process was killed by {name} (which no "
                    "agent process may send it: from outside) before it reported an outcome",
                    {"agent_process_end": name})
        what = (f"its process died by {name} (a fault or signal of its own: only SIGKILL, SIGTERM, SIGINT and "
                f"SIGHUP are taken as sent from outside)")
    else:
        what = f"its process exited with code {end.get('code')} on its own"
    return (StopReason.ERROR.value, f"the agent side reported no outcome: {what}; scored as the agent's failure",
            {"agent_process_end": what})


def endpoint_failed(exc: BaseException, given: float | None = None, budget: float | None = None,
                    request_timeout: float | None = None) -> str | None:
    """Was `exc`, from a model this side called, a failure of the endpoint (then: which), not of the request?"""
    if isinstance(exc, TimeLeftExceeded) or type(exc).__name__ == "APITimeoutError":
        enough = min(x for x in (request_timeout, budget / 2 if budget else None, float("inf")) if x is not None)
        if given is not None and given < enough:  # called with too little of the task's time left: the agent's
            return None
    if isinstance(exc, TimeLeftExceeded):  # the endpoint never answered in the time it had
        return "the endpoint did not answer before the task's deadline"
    if isinstance(exc, ModelError):
        return None if exc.endpoint is False else "the model endpoint failed"
    return "the model endpoint failed"  # an SDK error the relay classified itself (`relay_failed`)


def lowered_by_agent(model: Any, params: dict[str, Any]) -> str | None:
    """Did the agent's call lower the client settings its failure would be judged by (retries, timeout)?"""
    for key, attr in (("max_retries", "max_retries"), ("request_timeout", "request_timeout")):
        value, ours = params.get(key), getattr(model, attr, None)
        try:
            if value is not None and ours is not None and float(value) < float(ours):
                return f"the agent lowered {key} to {value} (the run's: {ours})"
        except (TypeError, ValueError):
            return f"the agent set {key} to {value!r}"
    return None


def relay_failed(exc: BaseException) -> bool:
    """A relayed request's failure (the SDK's exception, one attempt): the endpoint's, or the request's?"""
    from qitos.models.openai_compat import _BadReply, _retryable

    return isinstance(exc, _BadReply) or _retryable(exc) or getattr(exc, "status_code", None) in (401, 403, 404)


class ObservedModel:
    """A scoring-side service's model (e.g. Tau-Bench's simulated user) whose failures count as this job's
    endpoint failures, as the forwarder's do."""

    def __init__(self, model: Any, evidence: OutsideEvidence) -> None:
        self._model, self._evidence = model, evidence

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        try:
            response = self._model.complete(*args, **kwargs)
        except ModelError as exc:
            self._evidence.failed_call(exc, request_timeout=getattr(self._model, "request_timeout", None))
            raise
        self._evidence.answered_call(counted=False)
        return response


def observed_factory(make: Any, evidence: OutsideEvidence) -> Any:
    """`runtime.make_model` whose models report their failures to `evidence`."""
    if make is None:
        return None

    def make_model(name: str | None = None) -> Any:
        model = make(name)
        return ObservedModel(model, evidence) if model is not None and hasattr(model, "complete") else model

    return make_model

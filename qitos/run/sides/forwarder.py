"""Forwarded model calls on the hub's loop: the agent side's `model.complete`, sent to an OpenAI-compatible
endpoint by the scoring side without a thread of its own.

The hub reads the call from the job's socket and starts `forward` on its loop (`Hub.spawn`); the request waits
for the endpoint beside every other job's socket, and the reply goes back without blocking the loop
(`Channel.send_nowait`). What is counted and written is `_Job`'s, exactly as for a call answered on a
model-call thread (`_Job._complete`): the call when it is asked for, the answer, tokens and cost when it comes,
and the `model_call` event. Models without an async path (the embedded one, scripted and replay models, a
proxy in the environment) keep the model-call threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from qitos.models.base import ModelError
from qitos.models.deadline import task_deadline
from qitos.run.sides.model_calls import MODEL_CALLS

if TYPE_CHECKING:
    from qitos.run.sides.scoring import _Job


@dataclass
class ModelCall:
    """One model call the agent side asked for: the model that answers it and what it sends."""

    model: Any
    name: Any  # the model the agent side named, if any
    messages: list[Any]
    tools: list[Any] | None
    params: dict[str, Any]
    given: float | None  # seconds left of the task's time budget when it was asked for
    events: list[dict[str, Any]] = field(default_factory=list)  # the client's retries, for the agent side's trace

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        self.events.append({"kind": kind, "payload": data})


def forwarded_on_loop(model: Any, message: dict[str, Any]) -> bool:
    """Whether this call goes through `forward`: a completion for the job's own model, which can send async."""
    if message.get("method") != "model.complete":
        return False
    payload = message.get("payload")
    named = payload.get("model") if isinstance(payload, dict) else None
    if named and named != getattr(model, "name", None):
        return False  # another model, made on demand: answered on a thread as before
    ready = getattr(model, "async_ready", None)
    return bool(ready and ready())


async def forward(job: "_Job", message: dict[str, Any]) -> None:
    """Answer one `model.complete` call on the hub's loop and send the reply."""
    call_id = message.get("id")
    payload = message.get("payload") if isinstance(message.get("payload"), dict) else {}
    try:
        call = job.model_call(payload)
        try:
            with task_deadline(call.given):  # --task-timeout bounds the wait (models/deadline.py)
                response = await call.model.acomplete(call.messages, call.tools, on_event=call.on_event, **call.params)
        except ModelError as exc:
            value = job.call_failed(call, exc)
        else:
            value = job.call_answered(call, response)
        reply = {"t": "reply", "id": call_id, "ok": True, "value": value}
    except Exception as exc:  # noqa: BLE001 - as `_Job._answer`: the agent side's observation
        reply = job.reply_refused(call_id, exc)
    try:
        job.channel.send_nowait(reply, MODEL_CALLS.run)
    except OSError:
        pass  # the job ended (cancelled, past its deadline, its process gone) meanwhile

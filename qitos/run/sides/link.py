"""The agent side's end of a job's socket: the trace it streams, sent in batches (`_Outbox`), and the calls it
makes across to the scoring side, answered on one reader thread (`_Link`). Runs in the job's process.
"""

from __future__ import annotations

import socket
import threading
from typing import Any


class _Outbox:
    """The trace stream, sent in batches: a step's events go together with the step record. Whatever may be
    followed by a wait (a model request, a tool call) or needs the scoring side now (a step, the end of the run, a
    call across) sends everything buffered first, so the trace is never more than a moment behind.

    Fewer messages, same moments: the manifest's first fields (`update`, `write_manifest`) wait for the `run_start`
    event that follows them at once; with a model the scoring side serves (`calls_follow_requests`) a
    `model_request` rides with the call that the request is for (`_Link.call` takes what is buffered), and so does
    the run's start (the scoring side writes what rode with a call, then forwards it); the run's `finalize` rides
    with the outcome (`done`), sent right after it."""

    FLUSH_EVENTS = frozenset({"run_start", "model_request", "tool_call"})
    LAZY_OPS = frozenset({"event", "update", "write_manifest", "finalize"})

    def __init__(self, channel: Any, calls_follow_requests: bool = False) -> None:
        self.channel = channel
        self._ops: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        riding = {"model_request", "run_start"} if calls_follow_requests else set()  # sent with the next call
        self._flush_events = self.FLUSH_EVENTS - riding

    def put(self, op: dict[str, Any]) -> None:
        with self._lock:
            self._ops.append(op)
        if op.get("op") not in self.LAZY_OPS or op.get("kind") in self._flush_events:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            ops, self._ops = self._ops, []
            if ops:  # sent under the lock: batches reach the scoring side in order
                self.channel.send({"t": "ops", "ops": ops})

    def send_with(self, message: dict[str, Any]) -> None:
        """Send `message` (a call) carrying what is buffered: the scoring side applies those first."""
        with self._lock:
            ops, self._ops = self._ops, []
            self.channel.send({**message, "ops": ops} if ops else message)


class _Link:
    """Calls to the scoring side, and the reader that routes replies and cancellation."""

    def __init__(self, channel: Any, outbox: _Outbox | None = None) -> None:
        self.channel = channel
        self.outbox = outbox
        self.cancel = threading.Event()
        self._replies: dict[int, Any] = {}
        self._ready = threading.Condition()
        self._next = 0
        self._closed = False

    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._read, name="qitos-agent-link", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the reader before the socket is closed. In a `batch` process a reader still inside `recv` when
        its socket closes would read from whatever socket the next job receives under the same descriptor
        number (it took a job's first message once: that job then waited forever)."""
        try:
            self.channel.sock.shutdown(socket.SHUT_RDWR)  # a blocked or later recv returns at once
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _read(self) -> None:
        try:
            while True:
                message = self.channel.recv()
                if message is None:
                    continue
                if message.get("t") == "cancel":
                    self.cancel.set()
                elif message.get("t") == "reply":
                    with self._ready:
                        self._replies[int(message["id"])] = message
                        self._ready.notify_all()
        except Exception:  # noqa: BLE001 - the scoring side went away: stop the run
            self.cancel.set()
            with self._ready:
                self._closed = True
                self._ready.notify_all()

    def wait_closed(self, timeout: float) -> None:
        """After `done`, stay until the scoring side closes the socket: it looks at the task's processes and
        files (their limits) first, which must still be there."""
        with self._ready:
            self._ready.wait_for(lambda: self._closed, timeout)

    def call(self, method: str, payload: dict[str, Any] | None = None) -> Any:
        from qitos.benchmark.contract import AgentCallRefused

        with self._ready:
            self._next += 1
            call_id = self._next
        call = {"t": "call", "id": call_id, "method": method, "payload": payload or {}}
        if self.outbox is not None:
            self.outbox.send_with(call)  # the scoring side has the trace up to this call before it answers
        else:
            self.channel.send(call)
        with self._ready:
            while call_id not in self._replies:
                if self._closed:
                    raise ConnectionError("the scoring side closed the connection")
                self._ready.wait(0.5)
            reply = self._replies.pop(call_id)
        if not reply.get("ok"):
            raise AgentCallRefused(str(reply.get("error")))
        return reply.get("value")

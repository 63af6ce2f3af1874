"""One thread on the scoring side reads every job's socket and writes what it streams.

Why not a thread per job: each job's thread woke for every message and, with 16 or 64 jobs in flight, queued
for the interpreter lock on every system call it made while writing the trace (measured at zero model latency,
16 in flight: about 150 thread switches per task in the job threads alone, a quarter of the scoring process's
CPU spent switching). Here one thread serves every socket that is ready, usually several per wake-up, and a
job's own thread sleeps until its job needs it:

- the stream (`ops`) is applied by the hub (`Conversation.on_message`);
- a model call goes to the model-call threads (`model_calls.py`), which reply; the hub reads on meanwhile;
- any other call (a benchmark's service: a simulated user, a tool on the scoring side) is answered by the job's
  own thread, as before: the hub stops reading that job's socket until the reply is sent (`resume`), so what
  follows a call is applied after it is answered, and a slow service never holds the other jobs up;
- the outcome, a limit reached, the deadline or a closed socket end the job (`finish`).

The hub never writes to a job's socket (a hostile agent that stops reading could block a write): replies and
the cancel message are sent by other threads. A partial message never blocks it either: a socket is read once
per readiness, whole messages are taken, the rest waits for more bytes.
"""

from __future__ import annotations

import os
import queue
import selectors
import socket
import threading
import time
from typing import Any, Protocol

from qitos.run.sides.wire import Channel

TICK_SECONDS = 0.25  # how often every job's limits, cancel and deadline are looked at between messages


class Conversation(Protocol):
    def on_message(self, message: dict[str, Any], now: float) -> Any:
        """Apply one message: None to read on, `CALL` to hand the message to the job's thread, else the outcome."""

    def on_tick(self, now: float) -> Any:
        """None, or the outcome (a limit reached, the deadline, the cancel's grace passed)."""


CALL = object()  # `on_message`: the job's own thread answers this call


class _Entry:
    __slots__ = ("channel", "conversation", "inbox")

    def __init__(self, channel: Channel, conversation: Conversation) -> None:
        self.channel, self.conversation = channel, conversation
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()  # ("call", message) | ("end", outcome) | ("raise", exc)


class Hub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._incoming: list[_Entry] = []  # to (re)register, handed over through the wake socket
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None

    def converse(self, channel: Channel, conversation: Conversation, answer: Any) -> Any:
        """Serve `channel` until its job ends; `answer(message)` replies to a call on this (the job's) thread.
        Returns the outcome; raises what ended the job otherwise (a closed socket, a bad stream)."""
        entry = _Entry(channel, conversation)
        self._add(entry)
        while True:
            kind, value = entry.inbox.get()
            if kind == "end":
                return value
            if kind == "raise":
                raise value
            answer(value)  # sends the reply; a failure to send ends the job as it did on its own thread
            self._add(entry)

    def _add(self, entry: _Entry) -> None:
        with self._lock:
            if self._thread is None:
                self._start()
            self._incoming.append(entry)
        assert self._wake_w is not None
        try:
            self._wake_w.send(b"x")
        except BlockingIOError:  # the hub has wake-ups pending already
            pass

    def _start(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._loop, name="qitos-job-hub", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        selector, next_tick = self._selector, time.monotonic() + TICK_SECONDS
        assert selector is not None
        while True:
            for key, _ in selector.select(max(0.0, next_tick - time.monotonic())):
                if key.data is None:
                    self._take_incoming()
                else:
                    self._read(key.data)
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + TICK_SECONDS
                for key in list(selector.get_map().values()):
                    if key.data is not None:
                        self._guard(key.data, lambda entry: entry.conversation.on_tick(now))

    def _take_incoming(self) -> None:
        assert self._wake_r is not None and self._selector is not None
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        with self._lock:
            entries, self._incoming = self._incoming, []
        for entry in entries:
            try:
                self._selector.register(entry.channel.sock, selectors.EVENT_READ, entry)
            except (OSError, ValueError, KeyError) as exc:  # e.g. a socket closed meanwhile: that job ends, not the hub
                entry.inbox.put(("raise", exc))
                continue
            self._read(entry)  # what arrived while it was away (whole messages already buffered)

    def _read(self, entry: _Entry) -> None:
        def serve(entry: _Entry) -> Any:
            channel, now = entry.channel, time.monotonic()
            closed = channel.fill_nowait()  # what the socket holds; its end is raised after the messages before it
            while (message := channel.take()) is not None:
                outcome = entry.conversation.on_message(message, now)
                if outcome is CALL:  # what follows it stays buffered until the call is answered
                    return ("call", message)
                if outcome is not None:
                    return ("end", outcome)
            if closed is not None:
                raise closed
            return None

        self._guard(entry, serve)

    def _guard(self, entry: _Entry, step: Any) -> None:
        """Run `step(entry)`; a result (or an exception) goes to the job's thread, and the hub lets go of the
        socket first (the job's thread closes it, or hands it back with `_add` after a call)."""
        try:
            result = step(entry)
            if result is None:
                return
            item = result if isinstance(result, tuple) else ("end", result)
        except BaseException as exc:  # noqa: BLE001 - the job's thread handles it, as its own loop did
            item = ("raise", exc)
        assert self._selector is not None
        try:
            self._selector.unregister(entry.channel.sock)
        except (KeyError, ValueError):
            pass
        entry.inbox.put(item)

    def reset_after_fork(self) -> None:
        """In a forked child (a --workers process): no hub thread yet, fresh locks."""
        self.__init__()  # type: ignore[misc]


HUB = Hub()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=HUB.reset_after_fork)

"""One thread on the scoring side reads every job's socket and writes what it streams (an asyncio loop).

Why not a thread per job: each job's thread woke for every message and, with 16 or 64 jobs in flight, queued
for the interpreter lock on every system call it made while writing the trace (measured at zero model latency,
16 in flight: about 150 thread switches per task in the job threads alone, a quarter of the scoring process's
CPU spent switching). Here one thread serves every socket that is ready, usually several per wake-up, and a
job's own thread sleeps until its job needs it:

- the stream (`ops`) is applied by the hub (`Conversation.on_message`);
- a model call to an OpenAI-compatible endpoint is forwarded on the hub's loop itself (`spawn`, `forwarder.py`):
  the request waits for the endpoint beside every job's socket, with no thread handing it over and back; other
  models (the embedded one, scripted ones) are called on the model-call threads (`model_calls.py`);
- any other call (a benchmark's service: a simulated user, a tool on the scoring side) is answered by the job's
  own thread, as before: the hub stops reading that job's socket until the reply is sent (`resume`), so what
  follows a call is applied after it is answered, and a slow service never holds the other jobs up;
- the outcome, a limit reached, the deadline or a closed socket end the job (`finish`).

The hub never blocks on a job's socket (a hostile agent that stops reading could block a write): replies are
sent without waiting (`Channel.send_nowait`), and what the socket cannot take at once, like the cancel message,
is sent by another thread. A partial message never blocks it either: a socket is read once per readiness, whole
messages are taken, the rest waits for more bytes.
"""

from __future__ import annotations

import asyncio
import os
import queue
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
    __slots__ = ("channel", "conversation", "inbox", "fd")

    def __init__(self, channel: Channel, conversation: Conversation) -> None:
        self.channel, self.conversation = channel, conversation
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()  # ("call", message) | ("end", outcome) | ("raise", exc)
        self.fd = -1  # its socket's, while the hub reads it


class Hub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._entries: dict[int, _Entry] = {}  # by socket fd: the jobs being read (the loop's thread only)
        self._tasks: set[asyncio.Task] = set()  # coroutines started with `spawn` (asyncio keeps weak references)

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

    def spawn(self, coroutine: Any) -> None:
        """Run `coroutine` on the hub's loop (called on the hub's thread, e.g. from `on_message`): a forwarded model
        call waits for its endpoint there, beside every job's socket, with no thread of its own."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _add(self, entry: _Entry) -> None:
        with self._lock:
            if self._loop is None:
                self._start()
            loop = self._loop
        assert loop is not None
        loop.call_soon_threadsafe(self._register, entry)

    def _start(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.call_later(TICK_SECONDS, self._tick)
            loop.run_forever()

        threading.Thread(target=run, name="qitos-job-hub", daemon=True).start()
        started.wait()

    def _register(self, entry: _Entry) -> None:
        assert self._loop is not None
        try:
            fd = entry.channel.sock.fileno()
            self._loop.add_reader(fd, self._read, entry)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:  # e.g. a socket closed meanwhile: that job ends
            entry.inbox.put(("raise", exc))
            return
        self._entries[fd], entry.fd = entry, fd
        self._read(entry)  # what arrived while it was away (whole messages already buffered)

    def _tick(self) -> None:
        """Every job's limits, cancel and deadline, looked at between messages."""
        assert self._loop is not None
        self._loop.call_later(TICK_SECONDS, self._tick)
        now = time.monotonic()
        for entry in list(self._entries.values()):
            self._guard(entry, lambda entry: entry.conversation.on_tick(now))

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
        assert self._loop is not None
        if self._entries.get(entry.fd) is entry:
            del self._entries[entry.fd]
            self._loop.remove_reader(entry.fd)
        entry.inbox.put(item)

    def reset_after_fork(self) -> None:
        """In a forked child (a --workers process): no hub thread yet, fresh locks."""
        self.__init__()  # type: ignore[misc]


HUB = Hub()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=HUB.reset_after_fork)

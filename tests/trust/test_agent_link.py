"""The agent side's link reader ends with its job, so a `batch` agent process never reads another job's socket.

Found by benchmarks/harness_overhead.py (512 jobs, 64 in flight): a finished job's reader, still inside `recv`
when its socket closed, read the next job's first message from the socket that reused the descriptor number;
that job then waited forever for a message it would never get.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from qitos.run.sides.wire import Channel
from qitos.run.sides.link import _Link


def test_stop_ends_the_reader_before_the_socket_closes():
    ours, theirs = socket.socketpair()
    try:
        link = _Link(Channel(ours))
        link.start()
        time.sleep(0.05)  # the reader is now blocked in recv
        assert link._thread is not None and link._thread.is_alive()
        started = time.monotonic()
        link.stop()
        assert not link._thread.is_alive(), "the reader outlived its job: it could read the next job's socket"
        assert time.monotonic() - started < 2
    finally:
        ours.close()
        theirs.close()


def _frame(payload: bytes) -> bytes:
    import struct

    return struct.pack("!I", len(payload)) + payload


def test_channel_reads_whole_messages_however_the_bytes_arrive():
    """Several messages in one read, one message over several reads, a timeout with half a message here (kept, not
    lost), NaN (which orjson refuses) decoded as the json module does, a non-object refused."""
    import math
    import threading

    from qitos.run.sides.wire import WireClosed

    ours, theirs = socket.socketpair()
    try:
        channel = Channel(ours)
        third = _frame(b'{"c":"x"}')
        theirs.sendall(_frame(b'{"a":1}') + _frame(b'{"b":[2,3]}') + third[:-4])
        assert channel.recv(timeout=1) == {"a": 1}
        assert channel.recv(timeout=1) == {"b": [2, 3]}
        later = threading.Timer(0.3, lambda: theirs.sendall(third[-4:]))
        later.start()
        assert channel.recv(timeout=0.05) == {"c": "x"}, "a started message is waited for, whatever the timeout"
        assert channel.recv(timeout=0.05) is None
        theirs.sendall(_frame(b'{"n":NaN}'))
        assert math.isnan(channel.recv(timeout=1)["n"])
        big = {"blob": "x" * (3 << 20)}
        sender = threading.Thread(target=Channel(theirs).send, args=(big,))
        sender.start()
        assert channel.recv() == big
        sender.join()
        theirs.sendall(_frame(b"[1]"))
        with pytest.raises(WireClosed):
            channel.recv(timeout=1)
    finally:
        ours.close()
        theirs.close()


def test_a_call_carries_the_trace_before_it():
    """The trace a call follows (the run's start and its `model_request`) rides with the call in one message; a
    step is sent at once; the run's `finalize` rides with the outcome. Without a model the scoring side serves,
    the run's start is sent at once."""
    from qitos.run.sides.link import _Outbox

    ours, theirs = socket.socketpair()
    try:
        sent = Channel(ours)
        outbox = _Outbox(sent, calls_follow_requests=True)
        link = _Link(sent, outbox)
        for op in ({"op": "update", "fields": {}}, {"op": "write_manifest"}):
            outbox.put(op)
        outbox.put({"op": "event", "kind": "run_start"})
        outbox.put({"op": "event", "kind": "model_request"})
        replies = Channel(theirs)
        assert replies.recv(timeout=0.1) is None, "the run's start and the model_request wait for their call"
        link.start()
        answered = {}
        caller = threading.Thread(target=lambda: answered.update(value=link.call("model.complete", {"x": 1})))
        caller.start()
        call = replies.recv(timeout=2)
        assert call["t"] == "call" and [(o["op"], o.get("kind")) for o in call["ops"]] == [
            ("update", None), ("write_manifest", None), ("event", "run_start"), ("event", "model_request")]
        replies.send({"t": "reply", "id": call["id"], "ok": True, "value": 42})
        caller.join(timeout=5)
        assert answered == {"value": 42}
        outbox.put({"op": "step", "record": {}})
        assert replies.recv(timeout=1)["ops"] == [{"op": "step", "record": {}}]
        outbox.put({"op": "finalize", "status": "completed", "summary": {}})
        assert replies.recv(timeout=0.1) is None, "the finalize waits for the outcome"
        outbox.send_with({"t": "done", "outcome": {}})
        done = replies.recv(timeout=1)
        assert done["t"] == "done" and [o["op"] for o in done["ops"]] == ["finalize"]
        own_model = _Outbox(sent)  # its model is called on the agent side: nothing to ride with
        own_model.put({"op": "update", "fields": {}})
        own_model.put({"op": "event", "kind": "run_start"})
        assert [o["op"] for o in replies.recv(timeout=1)["ops"]] == ["update", "event"]
        link.stop()
    finally:
        ours.close()
        theirs.close()


def test_batch_job_threads_are_reused_with_a_fresh_context_each():
    import contextvars

    from qitos.run.sides.job_threads import JobThreads

    pool = JobThreads()
    var: contextvars.ContextVar[str] = contextvars.ContextVar("left_by_a_job", default="fresh")
    seen: list[str] = []
    for i in range(20):  # one after another: one thread serves them all
        done = threading.Event()

        def job(i=i, done=done):
            seen.append(var.get())
            var.set(f"job {i}")
            done.set()

        pool.run(job)
        assert done.wait(5)
        time.sleep(0.01)  # the thread is idle again before the next job arrives
    assert pool.started == 1
    assert seen == ["fresh"] * 20, "a job saw a context variable an earlier job set"
    gate, running = threading.Event(), threading.Semaphore(0)
    for _ in range(5):  # five at once: five threads
        pool.run(lambda: (running.release(), gate.wait(5)))
    for _ in range(5):
        assert running.acquire(timeout=5)
    gate.set()
    assert pool.started == 5

"""The agent side's link reader ends with its job, so a `batch` agent process never reads another job's socket.

Found by benchmarks/harness_overhead.py (512 jobs, 64 in flight): a finished job's reader, still inside `recv`
when its socket closed, read the next job's first message from the socket that reused the descriptor number;
that job then waited forever for a message it would never get.
"""

from __future__ import annotations

import socket
import time

from qitos.benchmark.sides.wire import Channel
from qitos.benchmark.sides.zygote import _Link


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

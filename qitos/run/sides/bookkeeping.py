"""One job at a time in a scoring process sets up or finishes its trace (`BOOKKEEPING`), so the hub is not starved.

Why: a scoring process runs one thread per job slot beside the hub thread that reads every job's socket and
forwards its model calls (`hub.py`). When a wave of jobs ends together (64 in flight at 200 ms model latency),
dozens of slot threads finish one run and set up the next at the same moment, all runnable, all asking for
the interpreter lock; the hub thread is one of many askers and waited its turn again after every system call.
Its reads and forwards fell behind: an agent's first model call reached the endpoint 20 ms late at the median,
65 ms at the 90th percentile, and the whole batch was 15-25 % slower than the bare SDK on threads.

With this lock held around a slot's own bookkeeping (creating the trace writer and the job message; the
closure, the official checks and the final manifest), at most one slot thread competes with the hub at a time.
The work is the same; the hub's turn comes sooner. Held only around QitOS's own local work, never around a
wait: not the agent's run, a model call, the hello, nor an adapter's `prepare`, `evaluate` or `cleanup`
(which may start containers or call a judge).
"""

from __future__ import annotations

import os
import threading

BOOKKEEPING = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child (a --workers process) gets a free lock, whatever its parent's threads held at the fork."""
    global BOOKKEEPING
    BOOKKEEPING = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)

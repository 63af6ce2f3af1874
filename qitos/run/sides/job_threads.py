"""`batch` mode's job threads, reused across jobs (one thread per job in flight at most, not one per job)."""

from __future__ import annotations

import contextvars
import threading
from typing import Any


class JobThreads:
    """`batch` mode's job threads, reused: a job runs on an idle one, and a thread is started only when every one
    is busy (as many as jobs were ever in flight at once, not one per job). Each job runs in a fresh `contextvars`
    context, so no context variable a job set is seen by the next job on its thread."""

    def __init__(self) -> None:
        self._work: Any = None
        self._lock = threading.Lock()
        self._idle = self.started = 0

    def run(self, fn: Any, *args: Any) -> None:
        import queue

        with self._lock:
            if self._work is None:
                self._work = queue.SimpleQueue()
            start = self._idle == 0
            if start:
                self.started += 1
            else:
                self._idle -= 1
        self._work.put((fn, args))
        if start:
            threading.Thread(target=self._serve, name="qitos-agent-job", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, args = self._work.get()
            try:
                contextvars.Context().run(fn, *args)
            except BaseException:  # noqa: BLE001 - a job reports its own failure; the thread serves the next one
                pass
            with self._lock:
                self._idle += 1


JOB_THREADS = JobThreads()

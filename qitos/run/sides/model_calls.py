"""The scoring side's threads that answer forwarded model calls (one per call in flight, reused)."""

from __future__ import annotations

import queue
import threading
from typing import Any


class _ModelCalls:
    """Where model calls are answered: reused daemon threads, one per call in flight, so a job's loop keeps
    watching for a cancel and its deadline while the endpoint works (and a hung endpoint never delays exit).

    A call counts as finished once its answer is computed, before the answer is sent: the agent's next call,
    sent the moment it reads the answer, then finds that thread idle instead of starting one more."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = self._busy = 0
        self._lock = threading.Lock()

    def submit(self, compute: Any, deliver: Any) -> None:
        """Run `compute()` on a free thread, then `deliver(its result)`."""
        with self._lock:
            self._busy += 1
            spawn = self._busy > self._threads
            self._threads += 1 if spawn else 0
        if spawn:
            threading.Thread(target=self._serve, name="qitos-model-call", daemon=True).start()
        self._work.put((compute, deliver))

    def run(self, work: Any) -> None:
        """Run `work()` on a free thread (e.g. the rest of a reply the hub's loop could not send at once)."""
        self.submit(lambda: work() and None, lambda _: None)

    def _serve(self) -> None:
        while True:
            compute, deliver = self._work.get()
            try:
                result = compute()
            except BaseException:  # noqa: BLE001 - `compute` answers every failure itself; the thread lives on
                result = None
            with self._lock:
                self._busy -= 1
            if result is not None:
                try:
                    deliver(result)
                except Exception:  # noqa: BLE001 - the job ended (cancelled, past its deadline) meanwhile
                    pass

    @property
    def threads(self) -> int:
        return self._threads


MODEL_CALLS = _ModelCalls()

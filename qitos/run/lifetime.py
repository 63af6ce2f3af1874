"""How a batch ends when it is told to stop: signals, and processes that must not outlive their parent.

Ctrl-C, `timeout`, `docker stop` and a batch scheduler's time limit all mean the same thing: stop now, keep
what finished, leave nothing running. SIGTERM and SIGHUP therefore take Ctrl-C's path (in-flight runs end
`cancelled`, finished rows stay, exit 128 + the signal's number). SIGKILL cannot be caught, so every process a
batch starts (worker processes, agent hosts, servers) asks the kernel to signal it when its parent dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from typing import Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C, raised where Ctrl-C's KeyboardInterrupt would be: same cleanup path."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_of(exc: BaseException) -> int:
    """The signal a KeyboardInterrupt stands for (SIGINT for a plain Ctrl-C)."""
    return getattr(exc, "signum", signal.SIGINT)


def exit_code_for(signum: int) -> int:
    """The shell's convention: 128 + the signal's number (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    return 128 + int(signum)


@contextlib.contextmanager
def on_stop_signals(callback: Callable[[int], None], signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """In the main thread: each of `signals` calls `callback(signum)` (off the main thread Python cannot set
    handlers, and this does nothing). A signal this process was started with ignored stays ignored: under
    `nohup qit ...` a closed terminal's SIGHUP must not stop the run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handled = [sig for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, lambda signum, _frame: callback(signum)) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def raise_stopped(signum: int) -> None:
    raise Stopped(signum)


_noted: list[int] = []  # stop signals raised under `stop_signals_raise` (see `raise_if_stopped`)


def _note_and_raise(signum: int) -> None:
    _noted.append(signum)
    raise Stopped(signum)


def stop_signals_raise() -> contextlib.AbstractContextManager[None]:
    """In the main thread: SIGTERM and SIGHUP raise `Stopped`, as SIGINT raises KeyboardInterrupt. Each is noted
    too: one that lands while Python runs a finalizer (`__del__`, a weakref callback) has its exception swallowed
    ("Exception ignored in ..."), and `raise_if_stopped` raises it again at the caller's next safe point."""
    _noted.clear()
    return on_stop_signals(_note_and_raise, (signal.SIGTERM, signal.SIGHUP))


def raise_if_stopped() -> None:
    """Raise `Stopped` for a stop signal noted under `stop_signals_raise` (one whose exception was swallowed)."""
    if _noted:
        raise Stopped(_noted[0])


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Ask the kernel to send `signum` to this process when its parent (the thread that forked it) dies.

    Usable as a `preexec_fn` and in forked workers; a no-op off Linux."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except OSError:
        pass


def watch_parent(parent_pid: int, on_gone: Callable[[], None], interval: float = 0.2) -> None:
    """Call `on_gone` once `parent_pid` is no longer this process's parent (it died; we were re-parented).

    Backs up PR_SET_PDEATHSIG, which fires when the forking *thread* ends and can race with the fork."""

    def loop() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        on_gone()

    threading.Thread(target=loop, name="qitos-parent-watch", daemon=True).start()


__all__ = ["STOP_SIGNALS", "Stopped", "die_with_parent", "exit_code_for", "on_stop_signals", "raise_stopped",
           "raise_if_stopped", "signal_of", "stop_signals_raise", "watch_parent"]

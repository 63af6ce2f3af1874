"""A stop signal is never lost: one whose `Stopped` lands while Python runs a finalizer is swallowed there
("Exception ignored in ...") and raised again at the next safe point (CI once saw a SIGHUP run end with exit 0)."""

from __future__ import annotations

import os
import signal
import weakref

import pytest

from qitos.run.lifetime import Stopped, raise_if_stopped, signal_of, stop_signals_raise


class _Held:
    pass


def test_a_signal_swallowed_by_a_finalizer_is_raised_at_the_next_safe_point() -> None:
    reached = []
    with stop_signals_raise():
        held = _Held()
        weakref.finalize(held, lambda: os.kill(os.getpid(), signal.SIGHUP))  # the handler runs inside the callback
        del held  # the finalizer runs here; its Stopped(SIGHUP) is swallowed
        reached.append("after the finalizer")  # the plain flow went on: the stop would have been lost
        with pytest.raises(Stopped) as stopped:
            raise_if_stopped()
    assert reached and signal_of(stopped.value) == signal.SIGHUP


def test_nothing_is_raised_without_a_signal() -> None:
    with stop_signals_raise():
        raise_if_stopped()

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


@pytest.fixture
def hup_at_default():
    """SIGHUP as a terminal leaves it, however the tests were started (`nohup` ignores it)."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, previous)


def test_a_signal_swallowed_by_a_finalizer_is_raised_at_the_next_safe_point(hup_at_default) -> None:
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


def test_a_signal_ignored_at_start_stays_ignored() -> None:
    """`nohup qit ...`: SIGHUP ignored by whoever started qit is not turned into a stop."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals_raise():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the other stop signal is handled
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing is raised, nothing is noted
            raise_if_stopped()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)

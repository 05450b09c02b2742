"""pipebench/base/time_limit.py's `deadline`: whenever its alarm comes, leaving the block leaves no timer
running, the SIGALRM handler as it was, and the watchdog stopped."""
from __future__ import annotations

import signal
import threading
from types import SimpleNamespace

import pytest

from pipebench.base import time_limit


class _Stop(BaseException):
    pass


def test_an_alarm_as_the_block_leaves_disarms_all_the_same(monkeypatch):
    """The alarm is raised (for real: SIGALRM to this process) at the first thing the exit does, setting
    the watchdog's event: `stop` comes out of the block, and nothing of the limit is left behind."""
    events = []

    class AlarmAtFirstSet(threading.Event):
        def set(self):
            if not events[0][1]:
                events[0][1] = True
                signal.raise_signal(signal.SIGALRM)  # on_alarm raises `stop` here, the event not yet set
            super().set()

        def __init__(self):
            super().__init__()
            events.append([self, False])

    monkeypatch.setattr(time_limit, "threading", SimpleNamespace(
        Event=AlarmAtFirstSet, Thread=threading.Thread, current_thread=threading.current_thread,
        main_thread=threading.main_thread))
    before = signal.getsignal(signal.SIGALRM)
    try:
        with pytest.raises(_Stop):
            with time_limit.deadline(600.0, lambda: "late", _Stop):
                pass
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no timer left to fire
        assert signal.getsignal(signal.SIGALRM) is before
        assert events[0][0].is_set()  # the watchdog ends no process later
    finally:  # on a failure, nothing of it outlives the test
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        threading.Event.set(events[0][0])

"""How long work of the user's code may take, and the limit itself: a model's forward that never returns
ends the command with one line that names what it waited for, not a hang.

`LIMIT_SECONDS` is the one default: a case of `pipebench run` (each in its own processes, stopped by its
parent: bench/launch/sessions.py) and the profiling of `pipebench plan` and `advise` (in this process,
under `time_limit`) take at most that long unless --timeout says otherwise.

`time_limit` works where the work runs, in the main thread: a SIGALRM timer raises into it (again each
second until the code lets it out), and a watchdog thread ends the process a grace period later where the
code never returns to Python (a kernel that hangs, a lock) or swallows what is raised: the same line, exit
status 2. What the command made ends with it (pipebench/processes.py: its reaper). Off the main thread
no timer can be set, and the work has no limit (models/imports.py guards a model file's import the same
way, with its own limit).
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator

from pipebench.errors import UserError, printable

__all__ = ["LIMIT_SECONDS", "WEEK_SECONDS", "time_limit"]

LIMIT_SECONDS = 1800.0
"""Seconds a case of `run`, or the profiling of `plan` and `advise`, may take (--timeout)."""
WEEK_SECONDS = 7 * 24 * 3600.0
"""What stands for no limit where a timeout must be given (a store's wait, a training): a week, while the
parent lives (what it started ends with it: pipebench/processes.py)."""
GRACE_SECONDS = 2.0
"""How long past the limit the watchdog waits for the timer's exception to end the work."""


class _Late(BaseException):
    """Raised into the work at its limit (a BaseException: an `except Exception` in the user's code lets it by)."""


@contextlib.contextmanager
def time_limit(seconds: float | None, late: Callable[[], str]) -> Iterator[None]:
    """The block ends within `seconds` (None: no limit): past it, UserError(late()), or, where the block
    does not let the exception out, the line on stderr and exit status 2 at once. `late()` is asked when
    the limit passes, so that it can name what was being waited for then."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    finished = threading.Event()

    def on_alarm(signum, frame):
        if not finished.is_set():
            raise _Late

    def watchdog():
        if not finished.wait(seconds + GRACE_SECONDS):
            try:
                os.write(2, f"pipebench: error: {printable(late())}\n".encode(errors="replace"))
            finally:
                os._exit(2)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    earlier = signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    threading.Thread(target=watchdog, daemon=True, name="pipebench-time-limit").start()
    try:
        yield
    except _Late:
        raise UserError(late()) from None
    finally:
        finished.set()
        signal.setitimer(signal.ITIMER_REAL, 0)
        if previous is not None:
            signal.signal(signal.SIGALRM, previous)
        if earlier[0]:
            signal.setitimer(signal.ITIMER_REAL, *earlier)

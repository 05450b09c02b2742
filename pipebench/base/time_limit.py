"""How long work of the user's code may take, and the limit itself: a model's forward that never returns
ends the command with one line that names what it waited for, not a hang.

`LIMIT_SECONDS` is the one default: a case of `pipebench run` (each in its own processes, stopped by its
parent: bench/launch/sessions.py) and the profiling of `pipebench plan` and `advise` (in this process,
under `time_limit`) take at most that long unless --timeout says otherwise.

`time_limit` works where the work runs, in the main thread: a SIGALRM timer raises into it (again each
second until the code lets it out), and a watchdog thread ends the process a grace period later where the
code never returns to Python (a kernel that hangs, a lock) or swallows what is raised: the same line, exit
status 2. What the command made ends with it (pipebench/base/processes.py: its reaper). Off the main thread
no timer can be set, and the work has no limit. `deadline` is that mechanism alone, with the exception it
raises and the watchdog off the main thread for its caller to choose: models/imports.py guards a model
file's import with it.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator

from pipebench.base.errors import UserError, printable

__all__ = ["LIMIT_SECONDS", "IMPORT_SECONDS", "import_seconds", "WEEK_SECONDS", "GRACE_SECONDS", "REAL_EXIT", "time_limit", "deadline", "end_process"]

LIMIT_SECONDS = 1800.0
"""Seconds a case of `run`, or the profiling of `plan` and `advise`, may take (--timeout)."""
IMPORT_SECONDS = 120.0
"""How long a model file's (or module's) import may take, $PIPEBENCH_IMPORT_SECONDS unless set: importing
torch and transformers takes seconds here, a file that takes minutes is waiting for something."""
WEEK_SECONDS = 7 * 24 * 3600.0
"""What stands for no limit where a timeout must be given (a store's wait, a training): a week, while the
parent lives (what it started ends with it: pipebench/base/processes.py)."""
GRACE_SECONDS = 2.0
"""How long past the limit the watchdog waits for the timer's exception to end the work."""


def import_seconds() -> float:
    """The import's time limit (models/imports.py): $PIPEBENCH_IMPORT_SECONDS, else IMPORT_SECONDS. The command
    line asks it before any command, so that a bad value is refused where no model file is imported too."""
    from pipebench.base.text.units import env_seconds

    return env_seconds("PIPEBENCH_IMPORT_SECONDS", IMPORT_SECONDS, 1e6)


REAL_EXIT = os._exit
"""os._exit itself: models/imports.py puts its own in its place while a model file is imported."""


_UNSET = object()
"""No SIGALRM handler replaced yet (None is signal.signal's answer for one set outside Python)."""


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
    try:
        with deadline(seconds, late, _Late):
            yield
    except _Late:
        raise UserError(late()) from None


@contextlib.contextmanager
def deadline(seconds: float, late: Callable[[], str], stop: type[BaseException]) -> Iterator[None]:
    """On the main thread, `stop` raised into the block at `seconds` and again each second until it lets it
    out (a SIGALRM timer; its handler, and a timer someone else had running, put back on leaving), and
    GRACE_SECONDS later, where the block never returns to Python or swallows what is raised, late() on
    stderr and exit status 2 at once (end_process, from a watchdog thread). Off the main thread, where no
    timer can be set (Python runs signal handlers there only), the watchdog alone, at `seconds`."""
    finished = threading.Event()
    timed = threading.current_thread() is threading.main_thread()

    def on_alarm(signum, frame):
        if not finished.is_set():
            raise stop

    def watchdog():
        if not finished.wait(seconds + (GRACE_SECONDS if timed else 0)):
            end_process(late())

    def disarm():
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)  # first: no alarm comes after this one
        finished.set()
        if timed:
            if previous is not None and previous is not _UNSET:  # None: set outside Python, left alone
                signal.signal(signal.SIGALRM, previous)
            if earlier[0]:  # someone's timer was running: it goes on
                signal.setitimer(signal.ITIMER_REAL, *earlier)

    previous, earlier = _UNSET, (0.0, 0.0)
    try:  # armed inside: a limit that passes before the block starts (--timeout 0.001) still disarms
        if timed:
            previous = signal.signal(signal.SIGALRM, on_alarm)
            earlier = signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
        threading.Thread(target=watchdog, daemon=True, name="pipebench-time-limit").start()
        yield
    finally:
        try:
            disarm()
        except stop:  # the alarm came as the block left, before the timer was off: the limit passed; the
            disarm()  # next alarm is a second away, so this one ends it all
            raise


def end_process(message: str) -> None:
    """End the process now with the one line and exit status 2: what the work did leaves nothing to unwind
    to (what the command started ends with it: pipebench/base/processes.py). Written to the descriptor itself:
    the stuck thread may hold sys.stderr's lock."""
    try:
        os.write(2, f"pipebench: error: {printable(message)}\n".encode(errors="replace"))
    except OSError:
        pass
    REAL_EXIT(2)

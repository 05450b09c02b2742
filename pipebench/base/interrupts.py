"""Whether a signal asked this process to stop: the one record of it.

The command line turns SIGINT (Ctrl-C) and SIGTERM (timeout, Slurm, systemd, docker stop) into a
KeyboardInterrupt, once (`catch`), and exits 130. A KeyboardInterrupt is also an exception that any code
may raise: a model file or a --data function that raises one, with no signal sent, is the user's code
failing, one line and exit 2 like SystemExit (models/imports.py asks `arrived`). Where no handler of ours
is installed (the Python API in a caller's process, a worker's own) a KeyboardInterrupt is taken for
Ctrl-C, as Python does.
"""
from __future__ import annotations

import signal

__all__ = ["catch", "restore", "forget", "arrived", "signalled", "check"]

_arrived: list[int] = []
"""The signals that asked this process to stop, since `catch`."""


def _interrupt(signum, frame):
    _arrived.append(signum)
    for sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) is _interrupt:
            signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def catch() -> dict:
    """SIGTERM and SIGINT raise KeyboardInterrupt, once: the first also ignores both from then on, so that
    a second one cannot cut the clean-up short (which would leave processes and folders behind, and exit
    -15 or -2). A SIGINT ignored from the start (a shell's background job) stays ignored. Clears the record (the
    tests run many commands in one process). Returns the handlers to `restore`."""
    _arrived.clear()
    previous = {signal.SIGTERM: signal.getsignal(signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.default_int_handler
        signal.signal(signal.SIGINT, _interrupt)
    return previous


def restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def forget() -> None:
    """End the record with the command it stopped: a later command or API call in the same process (the
    tests, a notebook calling `main`) must not take an earlier command's signal for its own."""
    _arrived.clear()


def signalled() -> bool:
    """Whether a signal caught by `catch` has arrived."""
    return bool(_arrived)


def arrived() -> bool:
    """Whether a KeyboardInterrupt raised now may be a signal's: one caught has arrived, or this process
    catches none of ours (SIGINT's handler is not `_interrupt`), where Python's own meaning holds."""
    return bool(_arrived) or signal.getsignal(signal.SIGINT) is not _interrupt \
        and signal.getsignal(signal.SIGTERM) is not _interrupt


def check() -> None:
    """Raise KeyboardInterrupt if a signal caught by `catch` has arrived: called where work starts that
    would outlast it (workers about to start). A library's bare `except:` around an import (torch's, in the
    first second of `train`) can swallow the KeyboardInterrupt the signal raised, and the first signal
    ignores the next: without this the training ran to its end and only then said "interrupted"."""
    if _arrived:
        raise KeyboardInterrupt

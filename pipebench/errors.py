"""The one error class for bad input: what the user can fix, said in one line.

Every check of user input in pipebench raises `UserError` or a subclass (an unknown model, a batch that
does not split, a malformed file, a GPU that does not exist, a memory cap nothing fits). The command line
prints it as `pipebench: error: <message>` and exits with status 2; any other exception is a bug and
keeps its traceback.
"""
from __future__ import annotations

__all__ = ["UserError", "DeviceError", "first_line"]


class UserError(ValueError):
    """Bad input the user can fix; the message is one line that names the value and, where it helps, the fix."""


class DeviceError(UserError):
    """A device that does not exist or cannot be used."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The error's first line (its type when it has no message), and its cause's: torch wraps some
    errors in a bare RuntimeError whose cause says what went wrong."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]
    if exc.__cause__ is not None and exc.__cause__ is not exc:
        line += f" ({first_line(exc.__cause__, limit)})"
    return line

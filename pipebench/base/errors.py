"""The one error class for bad input: what the user can fix, said in one line.

Every check of user input in pipebench raises `UserError` or a subclass (an unknown model, a batch that
does not split, a malformed file, a GPU that does not exist, a memory cap nothing fits). The command line
prints it as `pipebench: error: <message>` and exits with status 2; any other exception is a bug and
keeps its traceback. What is printed goes through `printable`: a message quotes what the user gave (a file
name, a model name, a CSV cell), and a control character in it would clear the terminal, rewrite the line
or split it in two. Progress lines (pipebench.base.text.progress) and the commands' answers go through it too.
"""
from __future__ import annotations

__all__ = ["UserError", "DeviceError", "EXIT_USAGE", "first_line", "printable"]

EXIT_USAGE = 2
"""The exit status of bad input (a UserError), wherever a process of pipebench's says it."""


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


def printable(text: str, keep: str = "") -> str:
    """`text` with every character that is not printable (escape sequences, CR, LF, NUL, other control and
    format characters) written as Python writes it in a string: `\\x1b`, `\\r`, `\\x00`, `\\u202e`. The one
    escape of whatever pipebench prints of the user's (error lines, progress lines, answers); `keep`: the
    characters a text's own layout needs (a table's line feeds)."""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)

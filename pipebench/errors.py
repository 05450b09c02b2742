"""The one error class for bad input: what the user can fix, said in one line.

Every check of user input in pipebench raises `UserError` or a subclass (an unknown model, a batch that
does not split, a malformed file, a GPU that does not exist, a memory cap nothing fits). The command line
prints it as `pipebench: error: <message>` and exits with status 2; any other exception is a bug and
keeps its traceback.
"""
from __future__ import annotations

__all__ = ["UserError"]


class UserError(ValueError):
    """Bad input the user can fix; the message is one line that names the value and, where it helps, the fix."""

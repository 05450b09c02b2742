"""What the commands say: the answer on stdout, progress and remarks on stderr (`note`, `DeferredNote`),
and the exit statuses."""
from __future__ import annotations

from pipebench.base.errors import EXIT_USAGE  # noqa: F401 - the commands' exit status of bad input

EXIT_INTERRUPTED = 130


def note(message: str, end: str = "\n") -> None:
    """Progress and remarks go to stderr, so stdout holds only the command's answer (through tqdm, which
    keeps a progress bar whole)."""
    from pipebench.base.text.progress import say

    say(message, end=end)


class DeferredNote:
    """A `note` that says `line` (where the work runs) before its own first line, or at `flush` when the
    work said nothing: said at once, it was a second line above a refusal that the work's first checks make
    (a damaged --resume folder, data that do not fit the model), where a refusal is one line."""

    def __init__(self, line: str | None):
        self.pending = line

    def __call__(self, message: str, end: str = "\n") -> None:
        self.flush()
        note(message, end=end)

    def flush(self) -> None:
        if self.pending:
            line, self.pending = self.pending, None
            note(line)


def answer(text: str = "") -> None:
    """The command's answer on stdout, `printable` but for its own line feeds: a model's, layer's or file's
    name in it cannot clear the terminal or rewrite a line."""
    from pipebench.base.errors import printable

    print(printable(text, keep="\n"))

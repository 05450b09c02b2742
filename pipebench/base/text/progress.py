"""Progress on long work (profiling a model, size after size and segment after segment): a tqdm bar on
stderr with how far along it is and the time left, drawn only when stderr is a terminal, so that logs
and pipes get the plain lines alone."""
from __future__ import annotations

import sys

__all__ = ["ProgressBar", "say"]


def say(message: str, end: str = "\n") -> None:
    """A line on stderr that does not tear a bar being drawn (tqdm clears and redraws it), `printable`: a
    model's or file's name in it cannot clear the terminal, rewrite the line or start another."""
    from tqdm import tqdm

    from pipebench.base.errors import printable

    tqdm.write(printable(message), file=sys.stderr, end=end)
    sys.stderr.flush()


class ProgressBar:
    """Called as progress(done, total, what) by the profiler; a bar appears on the first call and goes
    when the work ends (`close`, or a `with` block)."""

    def __init__(self, unit: str = "segment"):
        self.unit = unit
        self._bar = None
        self.doing: str | None = None
        """What the last call said was starting (a time limit names it: pipebench/base/time_limit.py)."""

    def __call__(self, done: int, total: int, what: str) -> None:
        self.doing = what
        if not sys.stderr.isatty():
            return
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=total, unit=self.unit, file=sys.stderr, leave=False, dynamic_ncols=True,
                             bar_format="{desc} {bar} {n_fmt}/{total_fmt} {unit}s [{elapsed}<{remaining}]")
        if self._bar.total != total:
            self._bar.total = total
        from pipebench.base.errors import printable

        self._bar.set_description_str(printable(what), refresh=False)
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

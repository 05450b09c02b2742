"""Tables of text cells for `python -m pipebench.bench.predict.fidelity` and the measurement scripts: markdown
for the results READMEs, aligned plain text for a terminal. Nothing here imports torch or pandas."""
from __future__ import annotations

from typing import Sequence

__all__ = ["text_table"]


def text_table(head: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool = False) -> str:
    """`head` over `rows`, one line each: a markdown table, or columns padded to their widest cell."""
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(cell) for cell in column) for column in zip(head, *rows)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *rows])

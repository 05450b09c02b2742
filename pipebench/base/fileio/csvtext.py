"""CSV as pipebench writes and reads it: one home for what makes a cell safe to open in a spreadsheet.

Every CSV pipebench writes (a run's results, report's summary.csv, train's --csv) goes through `csv_text`
or `csv_line`, and pipebench's own reader (`csv_rows`) reads back exactly what they wrote:
- A text cell that a spreadsheet would run as a formula, one starting with = + - @ (a model named
  `=HYPERLINK(...)`), a tab, a carriage return or a line feed, is written with a leading ' which a
  spreadsheet shows as text (OWASP's advice on CSV injection); a cell that starts with ' gets one more,
  so that `csv_rows` takes exactly one off every cell that starts with one. Numbers (-1.5, 1e-05) stay
  numbers.
- Lines end in CRLF (RFC 4180). Python's csv module quotes a cell only for the characters of the line
  ending it writes: with "\\n" alone, a carriage return inside a name (`a\\r=1+1`) goes out unquoted, and
  a spreadsheet starts a new row at it, beginning with `=1+1`. With CRLF every cell that holds either
  character is quoted, and stays one cell.
- A CSV a spreadsheet saved reads too: a byte-order mark is dropped by files.read_text, CRLF or LF line
  ends, a formula's ' taken off or not there at all.
"""
from __future__ import annotations

import csv
import io
import re
from typing import Any, Iterable, Iterator, Sequence

from pipebench.base.errors import UserError

__all__ = ["LINE_END", "safe_cell", "read_cell", "csv_text", "csv_line", "frame_csv", "csv_rows"]

LINE_END = "\r\n"

_FORMULA = re.compile(r"[=+\-@\t\r\n']")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """`value` as a spreadsheet must see it: text that would start a formula (or starts with ') behind a
    '; anything else, numbers and number-like text included, as it is."""
    if isinstance(value, str) and _FORMULA.match(value) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def read_cell(text: str) -> str:
    """A cell as `safe_cell` was given it: one leading ' taken off."""
    return text[1:] if text.startswith("'") else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A whole CSV file: `header`, then `rows`, each a `csv_line`."""
    return csv_line(header) + "".join(csv_line(row) for row in rows)


def csv_line(cells: Sequence[Any]) -> str:
    """One CSV line, every cell `safe_cell`'d, None an empty cell (also a row appended to a file that
    grows, as train's --csv does)."""
    out = io.StringIO()
    csv.writer(out, lineterminator=LINE_END).writerow([safe_cell("" if c is None else c) for c in cells])
    return out.getvalue()


def frame_csv(frame) -> str:
    """A pandas DataFrame as a whole CSV file, its text cells (and column names) `safe_cell`'d, numbers
    written as pandas writes them (NaN an empty cell)."""
    import pandas as pd  # here: the other writers, and the readers, need no pandas

    safe = frame.rename(columns=safe_cell).apply(
        lambda column: column.map(safe_cell) if column.dtype == object or pd.api.types.is_string_dtype(column)
        else column)
    return safe.to_csv(index=False, lineterminator=LINE_END)


def csv_rows(text: str, where: str) -> Iterator[list[str]]:
    """The rows of CSV `text` (its header first), each cell as it was written (`read_cell`); what the csv
    module cannot read is one UserError naming `where` (the file) and the line."""
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # a cell over the csv module's field limit (131072), a NUL in older Pythons
            raise UserError(f"{where}: line {reader.line_num}: {exc}") from None
        yield [read_cell(c) for c in cells]

"""The suite's results file: one `Row` (bench/store/row.py) per benchmark case, safe against a crash at any moment.

No torch here: reports are made on machines without GPUs from files written on machines with them.

A run writes two files side by side, `<date>-<host>-<hardware>.json` and `.csv` (see `results_paths`).
The JSON file is the source of truth, one row per line so that committed results diff row by row:

    {"format": "pipebench-results", "version": 1, "rows": [
    {"model": "gpt", "flavour": "800m", "strategy": "pp-1f1b", "gpus": "0,1", ..., "timeline": [...]},
    ...
    ]}

The CSV is the flat view of the same rows for spreadsheets and `pandas.read_csv`: the columns are the
Row fields in order, lists joined with ";", None written as an empty cell, and the two timelines left out.

`append` rewrites both files whole through a temporary file, fsync and `os.replace`, JSON first: a crash
or Ctrl-C leaves each file either as it was or with the new row, never half-written, and the next
`append` brings a CSV that lags behind its JSON up to date. Two runs may share a results file (its name
is date-host-hardware: two jobs on one server): `append` holds a lock (filelock) on `.<name>.json.lock`
beside it and re-reads the JSON under the lock, so neither loses the other's rows. Rows found only in
the CSV (edited by hand, or written by something else) are never dropped silently: `append` keeps them
aside in `<stem>.csv-only-<time>.csv` and warns.
"""
from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, fields
from datetime import date as Date, datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from filelock import FileLock

from pipebench.bench.store.row import CSV_COLUMNS, DONE_STATUSES, FIELDS, LATER_FIELDS, ResultsError, Row, case_key
from pipebench.base.fileio.csvtext import csv_rows, csv_text
from pipebench.base.errors import UserError
from pipebench.base.fileio.file_names import slug
from pipebench.base.fileio.files import read_json, write_text

__all__ = ["FORMAT", "VERSION", "results_paths", "start_run", "claims_folder", "append", "load", "files", "done_keys",
           "claim"]

FORMAT = "pipebench-results"
VERSION = 1

DEFAULT_OUT = "pipebench-results"
"""Where rows go without --out: a folder of the user's own in the current folder, never beside the
reference results committed in pipebench's checkout (results/)."""


def results_paths(out_dir: str | Path, date: str | Date, host: str, hardware: str) -> tuple[Path, Path]:
    """(csv_path, json_path) named `<date>-<host>-<hardware>`, e.g. 2026-11-29-gpu1-2xNVIDIA-H200.csv."""
    day = date.isoformat()[:10] if isinstance(date, Date) else str(date)
    stem = "-".join(_slug(part, what) for part, what in ((day, "date"), (host, "host"), (hardware, "hardware")))
    out = Path(out_dir)
    return out / f"{stem}.csv", out / f"{stem}.json"


def start_run(csv_path: str | Path, json_path: str | Path, *, resume: bool, rerun: Iterable[str] = ()) -> set[tuple]:
    """Check the results files before a run starts anything, and return the case keys `--resume` skips:
    those of rows with a DONE_STATUSES status not in `rerun` (`--try-anyway` reruns "predicted-oom").

    Checked now, not at the first `append`, so that no case runs only to lose its row: a CSV without its
    JSON, an unreadable JSON, and a file that already exists while `resume` is off (running again without
    --resume would add a second row for every case, and the report would keep only the later). A new
    file is created now, empty, under the lock, so that of two runs started at once into one fresh
    folder the second is refused too."""
    csv_path, json_path = Path(csv_path), Path(json_path)
    with _locked(json_path):  # two runs starting at once: one claims the file, the other finds it taken
        if not json_path.exists():
            _refuse_csv_without_json(csv_path, json_path)
            write_text(json_path, _json_text([]))  # claimed: a second run without --resume is refused
            return set()
        rows = _load_json(json_path)
        if resume:
            _check_rewritable(json_path, csv_path)
    if not resume:
        held = f"already holds {len(rows)} row(s) from an earlier run" if rows else "was started by another run"
        raise ResultsError(f"{json_path}: {held}; add --resume to skip the cases done there and run the rest, "
                           f"or give another --out")
    return {case_key(row) for row in rows if row.status in DONE_STATUSES and row.status not in set(rerun)}


def _check_rewritable(*paths: Path) -> None:
    """Each existing file rewritten with its own text, as `append` will rewrite it after every case: a
    file that cannot be replaced (immutable, in a folder that takes no new file) is refused now, before a
    case runs only to lose its row.

    A file that is not a regular one is refused by its type before it is opened, as read_json refuses the
    JSON twin: a FIFO would wait here for a writer that never comes, and a link to /dev/null would be
    moved aside as unreadable and replaced by a regular file."""
    from pipebench.base.fileio.files import check_regular

    for path in paths:
        if not path.exists():
            continue
        check_regular(path, kind="results", error=ResultsError)
        try:
            write_text(path, path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, UserError) as exc:  # write_text: UserError for an OSError
            reason = getattr(exc, "strerror", None) or str(exc).rpartition(" (")[2].rstrip(")") or exc
            raise ResultsError(f"{path}: cannot be rewritten ({reason}), so no "
                               "row could be added to it; fix its permissions or give another --out") from None


def claims_folder(json_path: str | Path) -> Path:
    """The folder of `claim`'s files beside the results file `json_path`."""
    json_path = Path(json_path)
    return json_path.with_name(f".{json_path.name}.claims")


def append(row: Row, csv_path: str | Path, json_path: str | Path, *, warn: Callable[[str], None] | None = None) -> None:
    """Add `row` to the JSON file (in place of a failed or timed-out row of the same case, which --resume
    has run again) and rewrite the CSV from it; see the module docstring for why a crash
    at any point or a second writer loses no finished row. `warn` (default: a line on stderr) hears of
    CSV rows kept aside."""
    csv_path, json_path = Path(csv_path), Path(json_path)
    with _locked(json_path):
        if json_path.exists():
            rows = _load_json(json_path)
        else:
            _refuse_csv_without_json(csv_path, json_path)
            rows = []
        key = case_key(row)  # a failed or timed-out try of the case, which --resume ran again, is replaced
        rows = [r for r in rows if case_key(r) != key or r.status in DONE_STATUSES]
        rows.append(row)
        write_text(json_path, _json_text(rows))
        _keep_csv_only_rows(csv_path, rows, warn or _warn)
        write_text(csv_path, _csv_text(rows))


def load(paths: str | Path | Iterable[str | Path], *, warn: Callable[[str], None] | None = None) -> list[Row]:
    """Rows from results files (.json, or the flat .csv with empty timelines) or folders of them.

    A folder stands for its *.json files and those *.csv files that have no JSON twin; a CSV whose JSON
    twin is also given is skipped likewise, since the JSON holds the same rows and their timelines. A
    skipped twin is still read: one that is unreadable or holds rows its JSON lacks gets a line through
    `warn` (default: stderr), not an error, since the JSON, the source of truth, is whole."""
    rows: list[Row] = []
    for path in files(paths):
        if path.suffix == ".csv":
            rows.extend(_load_csv(path))
            continue
        json_rows = _load_json(path)
        twin = path.with_suffix(".csv")
        if twin.exists():
            problem = _csv_disagrees(twin, json_rows)
            if problem:
                (warn or _warn)(f"{twin}: {problem}; reporting from {path.name}")
        rows.extend(json_rows)
    return rows


def files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The files `load` reads for `paths`: folders expanded, a CSV left out when its JSON twin is there."""
    found = _expand(paths)
    jsons = {os.path.realpath(f) for f in found if f.suffix == ".json"}  # realpath: a link loop is no error
    return [f for f in found if not (f.suffix == ".csv" and os.path.realpath(f.with_suffix(".json")) in jsons)]


def done_keys(paths: str | Path | Iterable[str | Path], rerun: Iterable[str] = ()) -> set[tuple]:
    """Case keys `--resume` skips: rows that ended ok, out of memory or unavailable (failed ones run
    again), less those with a status in `rerun`. Files that do not exist yet hold nothing done."""
    existing = [p for p in _as_paths(paths) if Path(p).exists()]
    return {case_key(row) for row in load(existing) if row.status in DONE_STATUSES and row.status not in set(rerun)}


@contextmanager
def claim(key: tuple, json_path: str | Path):
    """Hold one case while it runs, so that two runs resuming into one results file never both run it:
    yields True when the case is this run's, False when another live run holds it. The claim is a file
    beside the results (`.<name>.claims/`), made with O_EXCL and naming its host and process; one whose
    process is gone (a run killed with -9) is taken over."""
    import hashlib
    import socket

    folder = claims_folder(json_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha256(repr(key).encode()).hexdigest()[:24]
    mine = f"{socket.gethostname()} {os.getpid()}"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            if _claim_alive(path):
                yield False
                return
            path.unlink(missing_ok=True)  # its run is gone: take it over
            continue
        with os.fdopen(fd, "w") as f:
            f.write(mine)
        break
    else:
        yield False
        return
    try:
        yield True
    finally:
        path.unlink(missing_ok=True)


def _claim_alive(path: Path) -> bool:
    """Whether the run that made claim `path` still runs (a claim from another host counts as alive)."""
    import socket

    try:
        host, pid = path.read_text().split()
        pid = int(pid)
    except (OSError, ValueError):
        return False  # unreadable or half written: no run stands behind it
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ----------------------------------------------------------------------------------------------- files

def _json_text(rows: list[Row]) -> str:
    lines = ",\n".join(json.dumps(asdict(r), allow_nan=False) for r in rows)
    return (f'{{"format": "{FORMAT}", "version": {VERSION}, "rows": [\n' + lines + ("\n" if rows else "")
            + "]}\n")


def _csv_text(rows: list[Row]) -> str:
    return _csv_table([_csv_cells(row) for row in rows])


def _csv_table(lines: list[tuple[str, ...]]) -> str:
    return csv_text(CSV_COLUMNS, lines)  # each cell spreadsheet-safe (pipebench/base/fileio/csvtext.py)


def _csv_cells(row: Row) -> tuple[str, ...]:
    return tuple(_csv_cell(getattr(row, name)) for name in CSV_COLUMNS)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)  # repr: floats read back exactly


def _read_text(path: Path) -> str:
    """A results file's text: a regular file only, bounded (files.read_text), a byte-order mark dropped."""
    from pipebench.base.fileio.files import read_text

    return read_text(path, kind="results", error=ResultsError)


def _load_json(path: Path) -> list[Row]:
    data = read_json(path, kind="results", error=ResultsError)  # one line for a file that is not JSON
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ResultsError(f"{path}: not a pipebench results file (field 'format' should be {FORMAT!r}, "
                           f"got {found!r})")
    if data.get("version") != VERSION:
        raise ResultsError(f"{path}: results version {data.get('version')!r} is not supported (expected {VERSION})")
    if not isinstance(data.get("rows"), list):
        raise ResultsError(f"{path}: field 'rows' should be a list, got {data.get('rows')!r}")
    rows = []
    for i, entry in enumerate(data["rows"]):
        where = f"{path}: rows[{i}]"
        if not isinstance(entry, dict):
            raise ResultsError(f"{where}: expected an object, got {entry!r}")
        unknown = sorted(set(entry) - set(FIELDS))
        if unknown:
            raise ResultsError(f"{where}: unknown field {unknown[0]!r}")
        missing = [name for name in FIELDS if name not in entry and name not in LATER_FIELDS]
        if missing:
            raise ResultsError(f"{where}: missing field {missing[0]!r}")
        rows.append(_make_row(entry, where))
    return rows


def _load_csv(path: Path) -> list[Row]:
    reader = csv_rows(_read_text(path), str(path))
    header = next(reader, None)
    if header is None:
        raise ResultsError(f"{path}: empty file, expected the header {','.join(CSV_COLUMNS)}")
    missing = [name for name in CSV_COLUMNS if name not in header and name not in LATER_FIELDS]
    if missing:
        raise ResultsError(f"{path}: not a pipebench results CSV: missing column {missing[0]!r}")
    types = {f.name: f.type for f in fields(Row)}
    rows = []
    for line, cells in enumerate(reader, start=2):
        if not cells:
            continue
        where = f"{path}: line {line}"
        if len(cells) != len(header):
            raise ResultsError(f"{where}: {len(cells)} cells for {len(header)} columns")
        record = dict(zip(header, cells))
        values = {}
        for name in (name for name in CSV_COLUMNS if name in record):
            try:
                values[name] = _parse_cell(types[name], record[name])
            except ValueError:
                raise ResultsError(f"{where}: field {name!r}: expected {types[name]}, got {record[name]!r}") from None
        rows.append(_make_row(values, where))
    return rows


def _parse_cell(kind: str, text: str) -> Any:
    if kind == "str":
        return text
    if kind == "list[int]":
        return [int(v) for v in text.split(";")] if text else []
    if kind == "list[float]":
        return [float(v) for v in text.split(";")] if text else []
    if text == "" and kind.endswith("| None"):
        return None
    if kind == "str | None":
        return text
    return int(text) if kind.startswith("int") else float(text)


def _make_row(values: dict[str, Any], where: str) -> Row:
    try:
        return Row(**values)
    except ValueError as exc:
        # "Row.batch: expected int" -> "rows[3]: field 'batch': expected int"
        message = re.sub(r"^Row\.(\w+)", lambda m: f"field {m.group(1)!r}", str(exc))
        raise ResultsError(f"{where}: {message}") from None


def _expand(paths) -> list[Path]:
    files = []
    for path in map(Path, _as_paths(paths)):
        if not path.exists():
            loop = path.is_symlink()
            raise ResultsError(f"{path}: {'a link that leads nowhere' if loop else 'no such file or folder'}")
        if path.is_dir():  # its files only, not its folders, and no link that leads nowhere (or in a loop)
            jsons = sorted(f for f in path.glob("*.json") if f.is_file())
            files += jsons + [c for c in sorted(path.glob("*.csv")) if c.is_file() and c.with_suffix(".json") not in jsons]
        elif path.suffix in (".json", ".csv"):
            files.append(path)
        else:
            raise ResultsError(f"{path}: not a results file (expected .json or .csv, or a folder of them)")
    return files


def _as_paths(paths) -> list:
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def _slug(text: str, what: str) -> str:
    """'2xNVIDIA H200' -> '2xNVIDIA-H200': letters, digits, '.', '_' and '+' kept, anything else one '-'."""
    name = slug(str(text), strip="-.")
    if not name:
        raise ValueError(f"{what} {text!r} leaves nothing to name a results file with")
    return name


# ------------------------------------------------------------------------------------- sharing, repair

@contextmanager
def _locked(json_path: Path):
    """Hold an exclusive lock (filelock, an flock on Unix) on `.<stem>.json.lock` beside the results file,
    across processes and threads. The lock file is left in place: removing it races with the next writer
    opening it. A link planted in its place is not followed (filelock opens it O_NOFOLLOW): opening it
    would create or touch whatever it points at."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    path = json_path.with_name(f".{json_path.name}.lock")
    lock = FileLock(path, mode=0o644)
    try:
        lock.acquire()
    except OSError as exc:
        if path.is_symlink():
            raise ResultsError(f"{path}: the lock file is a link; remove it (pipebench never follows one)") from None
        raise ResultsError(f"{path}: cannot open the lock file ({exc.strerror or exc})") from None
    try:
        yield
    finally:
        lock.release()


def _refuse_csv_without_json(csv_path: Path, json_path: Path) -> None:
    if csv_path.exists():
        raise ResultsError(f"{csv_path}: exists without its JSON file {json_path}; "
                           f"move it away rather than have it overwritten")


def _csv_disagrees(csv_path: Path, json_rows: list[Row]) -> str:
    """What is wrong with a CSV twin against its JSON rows: "" when it holds no row the JSON lacks."""
    try:
        extra = _csv_only_lines(csv_path, json_rows)
    except ResultsError as exc:
        return f"unreadable ({str(exc).removeprefix(f'{csv_path}: ')})"
    return f"{len(extra)} row(s) that its JSON twin lacks" if extra else ""


def _csv_only_lines(csv_path: Path, json_rows: list[Row]) -> list[tuple[str, ...]]:
    """The CSV's rows that the JSON rows do not account for, as CSV cells; ResultsError if unreadable.

    Compared as the cells `_csv_text` writes, so a CSV of an older layout (fewer columns) compares alike,
    and a CSV that lags its JSON by a row or two (a crash between the two writes) has nothing extra."""
    lines = Counter(_csv_cells(row) for row in _load_csv(csv_path))
    lines.subtract(_csv_cells(row) for row in json_rows)
    return [line for line, n in lines.items() if n > 0 for _ in range(n)]


def _keep_csv_only_rows(csv_path: Path, json_rows: list[Row], warn: Callable[[str], None]) -> None:
    """Before the CSV is rewritten from the JSON: move aside whatever of it would be lost, and say so."""
    if not csv_path.exists():
        return
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        extra = _csv_only_lines(csv_path, json_rows)
    except ResultsError as exc:
        aside = _free_name(csv_path.with_name(f"{csv_path.name}.unreadable-{stamp}"))
        os.replace(csv_path, aside)
        warn(f"{exc}; moved it to {aside.name} and rewrote {csv_path.name} from its JSON")
        return
    if extra:
        aside = _free_name(csv_path.with_name(f"{csv_path.stem}.csv-only-{stamp}.csv"))
        write_text(aside, _csv_table(extra))
        warn(f"{csv_path}: {len(extra)} row(s) were in the CSV but not in its JSON; kept in {aside.name}")


def _free_name(path: Path) -> Path:
    n = 1
    candidate = path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


def _warn(message: str) -> None:
    from pipebench.base.errors import printable

    print(f"pipebench: warning: {printable(message)}", file=sys.stderr, flush=True)

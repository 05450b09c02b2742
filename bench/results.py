"""The suite's results file: one `Row` per benchmark case, safe against a crash at any moment.

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
`append` brings a CSV that lags behind its JSON up to date. One process writes a results file at a time
(the parent of a run; workers report their rows back to it).
"""
from __future__ import annotations

import csv
import io
import json
import math
import numbers
import os
import re
import typing
from dataclasses import asdict, dataclass, field, fields
from datetime import date as Date
from pathlib import Path
from typing import Any, Iterable
from pipebench.errors import UserError
from pipebench.files import check, write_text

__all__ = ["FORMAT", "VERSION", "STATUSES", "DONE_STATUSES", "CSV_COLUMNS", "ResultsError", "Row", "case_key",
           "results_paths", "append", "load", "done_keys", "timeline_from_ops"]

FORMAT = "pipebench-results"
VERSION = 1
STATUSES = ("ok", "oom", "failed", "unavailable")
DONE_STATUSES = ("ok", "oom", "unavailable")
"""Statuses `--resume` does not run again: an out-of-memory or unavailable case would end the same way."""
TIMELINE_KEYS = {"stage": int, "device": int | str, "kind": str, "micro": int, "start_ms": float, "end_ms": float}
"""One operation of a timeline: kind is "F" (forward), "B" (backward), or "I" / "W" (a zero-bubble
schedule's input-gradient and weight-gradient halves of a backward); times from the step's start."""


class ResultsError(UserError):
    """A results file that is unreadable or malformed; the one-line message names the file and the field."""


@dataclass(kw_only=True)
class Row:
    """One benchmark case: what ran, how it went, what the Plan predicted, and where it ran."""

    model: str
    """Registry name, e.g. "gpt"."""
    flavour: str
    """Size flavour, e.g. "800m" or "tiny"."""
    strategy: str
    """"single", "dataparallel", "ddp", "modelparallel", "pipeline" or a "pp-*" schedule."""
    gpus: str
    """The GPU ids used, e.g. "0,1", or "cpu"."""
    world_size: int
    """Processes the strategy ran in (1 for single-process strategies)."""
    batch: int
    """Global batch: samples per optimizer step."""
    micro_batches: int
    """Micro-batches the batch is cut into (1 when not a pipeline)."""
    schedule: str = ""
    """Pipeline schedule, e.g. "gpipe" or "1f1b"; "" when not a pipeline."""
    virtual_stages: int = 1
    """Stages per device (more than 1 for interleaved schedules)."""
    status: str
    """"ok", "oom" (out of memory), "failed" (any other error) or "unavailable" (cannot run here)."""
    reason: str = ""
    """Why the case is not ok, one line; "" when ok."""
    samples_per_s: float | None = None
    """Measured throughput: batch / mean step time; None unless ok."""
    step_ms: float | None = None
    """Mean of the timed steps, every device synchronised."""
    step_ms_std: float | None = None
    """Standard deviation of the timed steps (None with a single timed step)."""
    peak_memory_bytes: list[int] = field(default_factory=list)
    """Peak bytes allocated per device during the timed steps (0 for a CPU)."""
    first_loss: float | None = None
    """Loss of the first step: equal across strategies when they compute the same thing."""
    predicted_step_ms: float | None = None
    """The Plan's predicted step time; None for strategies without a Plan."""
    predicted_memory_bytes: list[int] = field(default_factory=list)
    """The Plan's predicted bytes per device (stages of one device summed)."""
    bubble_fraction: float | None = None
    """The Plan's predicted idle share of device time."""
    bounds: list[int] = field(default_factory=list)
    """Stage cuts [0, ..., layers] from the Plan; empty when the model is not split."""
    plan_id: str = ""
    """`Plan.plan_id` of the Plan the case ran (saved as <results stem>-plans/<plan_id>.plan.json); "" without one."""
    speeds: str = ""
    """Speed factor per GPU the Plan was cut for (`--speeds`), e.g. "1;0.45"; "" when all equal."""
    device_name: str = ""
    """E.g. "NVIDIA H200", or "cpu"."""
    torch_version: str = ""
    host: str = ""
    started_at: str = ""
    """ISO 8601 time the case started; the later of two rows for one case is the one reported."""
    duration_s: float = 0.0
    """Wall time of the whole case: building, warm-up and timed steps."""
    timeline: list[dict] = field(default_factory=list)
    """One measured step: dicts with the keys of TIMELINE_KEYS; may be empty."""
    predicted_timeline: list[dict] = field(default_factory=list)
    """The Plan's simulated step, same shape; may be empty."""

    def __post_init__(self):
        # Normalise numpy and other numeric types to plain Python ones, so the row is JSON-ready; NaN
        # ("not measured", as pandas and statistics write it) becomes None.
        hints = typing.get_type_hints(Row)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, numbers.Real) and math.isnan(value) and f.type.endswith("| None"):
                value = None
            value = check(hints[f.name], value, f"Row.{f.name}", error=ResultsError)
            if f.name in ("timeline", "predicted_timeline"):
                value = [_timeline_entry(f"Row.{f.name}[{i}]", op) for i, op in enumerate(value)]
            setattr(self, f.name, value)
        if self.status not in STATUSES:
            raise ValueError(f"Row.status: {self.status!r} is not one of: {', '.join(STATUSES)}")
        for name in ("world_size", "batch", "micro_batches", "virtual_stages"):
            if getattr(self, name) < 1:
                raise ValueError(f"Row.{name}: must be at least 1 (got {getattr(self, name)})")
        if self.status == "ok" and (self.samples_per_s is None or self.step_ms is None):
            raise ValueError(f"Row: status 'ok' needs samples_per_s and step_ms "
                             f"(got {self.samples_per_s!r}, {self.step_ms!r})")
        if self.status != "ok" and not self.reason.strip():
            raise ValueError(f"Row.reason: say why the case is {self.status!r}")


FIELDS = tuple(f.name for f in fields(Row))
CSV_COLUMNS = tuple(name for name in FIELDS if name not in ("timeline", "predicted_timeline"))
"""The CSV header, in this order."""
LATER_FIELDS = ("speeds", "plan_id")
"""Fields added after the first files were written: a file without them still loads, with the default."""
CASE_FIELDS = ("model", "flavour", "strategy", "gpus", "batch", "micro_batches", "schedule", "virtual_stages",
               "speeds")


def case_key(row: Row) -> tuple:
    """What identifies a benchmark case, for `--resume` and the report: (model, flavour, strategy, gpus,
    batch, micro_batches, schedule, virtual_stages, speeds). The same case planned for other speeds is
    another case."""
    return tuple(getattr(row, name) for name in CASE_FIELDS)


def results_paths(out_dir: str | Path, date: str | Date, host: str, hardware: str) -> tuple[Path, Path]:
    """(csv_path, json_path) named `<date>-<host>-<hardware>`, e.g. 2026-11-29-gpu1-2xNVIDIA-H200.csv."""
    day = date.isoformat()[:10] if isinstance(date, Date) else str(date)
    stem = "-".join(_slug(part, what) for part, what in ((day, "date"), (host, "host"), (hardware, "hardware")))
    out = Path(out_dir)
    return out / f"{stem}.csv", out / f"{stem}.json"


def append(row: Row, csv_path: str | Path, json_path: str | Path) -> None:
    """Add `row` to the JSON file and rewrite the CSV from it; see the module docstring for why a crash
    at any point loses no finished row."""
    csv_path, json_path = Path(csv_path), Path(json_path)
    if json_path.exists():
        rows = _load_json(json_path)
    elif csv_path.exists():
        raise ResultsError(f"{csv_path}: exists without its JSON file {json_path}; "
                           f"move it away rather than have it overwritten")
    else:
        rows = []
    rows.append(row)
    write_text(json_path, _json_text(rows))
    write_text(csv_path, _csv_text(rows))


def load(paths: str | Path | Iterable[str | Path]) -> list[Row]:
    """Rows from results files (.json, or the flat .csv with empty timelines) or folders of them.

    A folder stands for its *.json files and those *.csv files that have no JSON twin; a CSV whose JSON
    twin is also given is skipped likewise, since the JSON holds the same rows and their timelines."""
    files = _expand(paths)
    given = {f.resolve() for f in files}
    rows: list[Row] = []
    for path in files:
        if path.suffix == ".csv" and path.with_suffix(".json").resolve() in given:
            continue
        rows.extend(_load_csv(path) if path.suffix == ".csv" else _load_json(path))
    return rows


def done_keys(paths: str | Path | Iterable[str | Path]) -> set[tuple]:
    """Case keys `--resume` skips: rows that ended ok, out of memory or unavailable (failed ones run
    again). Files that do not exist yet hold nothing done."""
    existing = [p for p in _as_paths(paths) if Path(p).exists()]
    return {case_key(row) for row in load(existing) if row.status in DONE_STATUSES}


def timeline_from_ops(ops: Iterable[Any]) -> list[dict]:
    """Timeline dicts from `partition.schedule.Op`s (times in ms); an Op without a device (None, or an
    older Op without the field) runs on the device numbered like its stage."""
    return [{"stage": op.stage, "device": op.stage if getattr(op, "device", None) is None else op.device,
             "kind": op.kind, "micro": op.micro, "start_ms": float(op.start), "end_ms": float(op.end)} for op in ops]


# ----------------------------------------------------------------------------------------------- files

def _json_text(rows: list[Row]) -> str:
    lines = ",\n".join(json.dumps(asdict(r), allow_nan=False) for r in rows)
    return (f'{{"format": "{FORMAT}", "version": {VERSION}, "rows": [\n' + lines + ("\n" if rows else "")
            + "]}\n")


def _csv_text(rows: list[Row]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([_csv_cell(getattr(row, name)) for name in CSV_COLUMNS])
    return out.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)  # repr: floats read back exactly


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read: {exc}") from None


def _load_json(path: Path) -> list[Row]:
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON: {exc}") from None
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
    reader = csv.reader(io.StringIO(_read_text(path)))
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
    if text == "" and kind.endswith("| None"):
        return None
    return int(text) if kind == "int" else float(text)


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
        if path.is_dir():
            jsons = sorted(path.glob("*.json"))
            files += jsons + [c for c in sorted(path.glob("*.csv")) if c.with_suffix(".json") not in jsons]
        elif path.suffix in (".json", ".csv"):
            files.append(path)
        else:
            raise ResultsError(f"{path}: not a results file (expected .json or .csv, or a folder of them)")
    return files


def _as_paths(paths) -> list:
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def _slug(text: str, what: str) -> str:
    """'2xNVIDIA H200' -> '2xNVIDIA-H200': letters, digits, '.', '_' and '+' kept, anything else one '-'."""
    slug = re.sub(r"[^A-Za-z0-9._+]+", "-", str(text)).strip("-.")
    if not slug:
        raise ValueError(f"{what} {text!r} leaves nothing to name a results file with")
    return slug


# ------------------------------------------------------------------------------------------- timelines

def _timeline_entry(where: str, op: Any) -> dict:
    if not isinstance(op, dict):
        raise ResultsError(f"{where}: expected an object, got {op!r}")
    entry = dict(op)
    for key, kind in TIMELINE_KEYS.items():
        if key not in op:
            raise ResultsError(f"{where}: missing key {key!r}")
        entry[key] = check(kind, op[key], f"{where}.{key}", error=ResultsError)
    return entry

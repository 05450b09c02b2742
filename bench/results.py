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
`append` brings a CSV that lags behind its JSON up to date. Two runs may share a results file (its name
is date-host-hardware: two jobs on one server): `append` holds a lock (filelock) on `.<name>.json.lock`
beside it and re-reads the JSON under the lock, so neither loses the other's rows. Rows found only in
the CSV (edited by hand, or written by something else) are never dropped silently: `append` keeps them
aside in `<stem>.csv-only-<time>.csv` and warns.
"""
from __future__ import annotations

import json
import math
import numbers
import os
import re
import sys
import typing
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import date as Date, datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from filelock import FileLock

from pipebench.csvtext import csv_rows, csv_text
from pipebench.errors import UserError
from pipebench.files import check, loads, write_text
from pipebench.training import CHECKPOINT_MODES, COMPILE_MODES, DEFAULT_PRECISION, OPTIMIZERS, PRECISIONS

__all__ = ["FORMAT", "VERSION", "STATUSES", "DONE_STATUSES", "CSV_COLUMNS", "ResultsError", "Row", "case_key",
           "settings_text", "results_paths", "start_run", "claims_folder", "append", "load", "files", "done_keys",
           "timeline_from_ops"]

FORMAT = "pipebench-results"
VERSION = 1
STATUSES = ("ok", "oom", "failed", "timeout", "unavailable", "predicted-oom", "diverged")
"""ok; oom: ran out of memory; failed: any other error; timeout: stopped at `run --timeout`; unavailable:
cannot run here; diverged: ran to the end and was timed, but its loss became NaN or infinite (the reason
says at which step; first_loss is empty where the first was not a number); predicted-oom: not run,
because its plan or cost model predicts it will not fit in the memory cap (the row carries that prediction
in predicted_memory_bytes and max_memory; `run --try-anyway` runs such cases to test the prediction)."""
DONE_STATUSES = ("ok", "oom", "unavailable", "predicted-oom", "diverged")
"""Statuses `--resume` does not run again: an out-of-memory, unavailable, diverged or predicted
out-of-memory case would end the same way (`--try-anyway` runs the predicted ones again)."""
MAX_FIGURE = 1e12
"""The largest samples/s, milliseconds or seconds a row may hold: a step of 30 years, a trillion samples
a second. Beyond it a figure is a corrupt file, and sums and axis limits overflow to infinity."""
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
    """A name in the strategy registry (bench/strategies), e.g. "pp-1f1b"."""
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
    """"ok", "oom" (out of memory), "failed" (any other error), "timeout" (stopped at its time limit),
    "unavailable" (cannot run here), "diverged" (timed, but the loss became NaN or infinite) or
    "predicted-oom" (predicted not to fit in the memory cap, so not run); see STATUSES."""
    reason: str = ""
    """Why the case is not ok, one line; "" when ok."""
    samples_per_s: float | None = None
    """Measured throughput: batch / mean step time; None unless ok."""
    step_ms: float | None = None
    """Mean of the timed steps, every device synchronised."""
    step_ms_std: float | None = None
    """Standard deviation of the timed steps (None with a single timed step)."""
    step_ms_best: float | None = None
    """The fastest timed step: the step without the machine's other load, which is what a prediction is
    judged against (bench/fidelity.py). On a CPU stand-in the host's load slows every process at once, in
    bursts (up to 1.9x on our VM), and `run --min-seconds` times steps long enough to see past them; on a
    GPU it is within a few percent of the mean. None in files written before the field."""
    round_ms: list[float] = field(default_factory=list)
    """The mean step of each round the case was measured in, in the order they ran (bench/suite.py
    run_rounds: cases interleaved A B C, C B A, ...): their spread is the case's noise, which the report
    judges "faster" by; empty for a case measured in one round, or in files written before the field."""
    same_work_as: str = ""
    """The strategy this case does the same computation as on its machine ("single" for a one-process
    strategy on one device: every one on the CPU), so that it can only measure a tie with it, or slower;
    "" otherwise (bench/suite.py same_work_as)."""
    peak_memory_bytes: list[int] = field(default_factory=list)
    """Peak bytes allocated per device during the timed steps (0 for a CPU)."""
    first_loss: float | None = None
    """Loss of the first step: equal across strategies when they compute the same thing."""
    predicted_step_ms: float | None = None
    """The Plan's predicted step time; None for strategies without a Plan."""
    predicted_step_spread: float | None = None
    """The prediction's interval, predicted_step_ms x (1 ± this), from its profile's noise (bench/advise.py
    Prediction.step_spread); None where no prediction was made or the file predates the field."""
    predicted_own_spread: float | None = None
    """The part of the interval that is the prediction's own, without the machine's drift (bench/advise.py
    Prediction.own_spread): what advise judges ties by; None where not made or the file predates it."""
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
    max_memory: str = ""
    """Memory cap per device in GiB the Plan was cut under (`--max-memory`, or on GPUs what was free at the
    start less a margin), 3 significant figures, e.g. "20;20"; "" without a cap or a Plan."""
    settings: str = ""
    """The other settings that change what runs, as `settings_text` writes them: the model's `--set`
    overrides, e.g. "depth=4;width=64"; "" for none."""
    precision: str = DEFAULT_PRECISION
    """How the case trained (pipebench/training.py): "fp32", "tf32" or "bf16". Files written before the
    field load as "tf32", as every earlier run was."""
    optimizer: str = "sgd"
    """"sgd" or "adamw"; earlier files load as "sgd"."""
    checkpoint: str = "never"
    """Activation recomputation: "never", "auto" or "always"; earlier files load as "never"."""
    compile: str | None = None
    """The torch.compile mode the case ran in ("default", "max-autotune", "cudagraphs"); None: eager (and
    every earlier file)."""
    compile_s: float | None = None
    """Seconds the warm-up steps took beyond as many timed steps: compiling (and cudagraphs' recording),
    kept out of step_ms; None when eager or not run."""
    graph_breaks: int | None = None
    """Graph breaks torch.compile took in the process that took the most (torch._dynamo's counters): a
    break is no failure, the code between runs eagerly; None when eager or not run."""
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
        for name, allowed in (("precision", PRECISIONS), ("optimizer", OPTIMIZERS), ("checkpoint", CHECKPOINT_MODES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"Row.{name}: {getattr(self, name)!r} is not one of: {', '.join(allowed)}")
        if self.compile is not None and self.compile not in COMPILE_MODES:
            raise ValueError(f"Row.compile: {self.compile!r} is not one of: {', '.join(COMPILE_MODES)}")
        if self.graph_breaks is not None and self.graph_breaks < 0:
            raise ResultsError(f"Row.graph_breaks: must not be negative (got {self.graph_breaks})")
        for name in ("world_size", "batch", "micro_batches", "virtual_stages"):
            if getattr(self, name) < 1:
                raise ValueError(f"Row.{name}: must be at least 1 (got {getattr(self, name)})")
        for name in ("samples_per_s", "step_ms", "step_ms_std", "step_ms_best", "predicted_step_ms",
                     "predicted_step_spread", "predicted_own_spread", "duration_s", "bubble_fraction", "compile_s"):
            value = getattr(self, name)
            if value is not None and value < 0:  # measurements: a negative one is a corrupt file
                raise ResultsError(f"Row.{name}: must not be negative (got {value})")
            if value is not None and value > MAX_FIGURE:  # so is 1e308, which no plot can scale to
                raise ResultsError(f"Row.{name}: {value:g} is not a measurement (at most {MAX_FIGURE:g})")
        if any(b < 0 for b in [*self.peak_memory_bytes, *self.predicted_memory_bytes]):
            raise ResultsError("Row: memory figures must not be negative")
        if any(not 0 <= ms <= MAX_FIGURE for ms in self.round_ms):
            raise ResultsError(f"Row.round_ms: every round's mean step must be a measurement (got {self.round_ms})")
        if self.status == "ok" and (self.samples_per_s is None or self.step_ms is None):
            raise ValueError(f"Row: status 'ok' needs samples_per_s and step_ms "
                             f"(got {self.samples_per_s!r}, {self.step_ms!r})")
        if self.status != "ok" and not self.reason.strip():
            raise ValueError(f"Row.reason: say why the case is {self.status!r}")


FIELDS = tuple(f.name for f in fields(Row))
CSV_COLUMNS = tuple(name for name in FIELDS if name not in ("timeline", "predicted_timeline"))
"""The CSV header, in this order."""
LATER_FIELDS = ("speeds", "plan_id", "max_memory", "settings", "precision", "optimizer", "checkpoint",
                "predicted_step_spread", "step_ms_best", "predicted_own_spread", "compile", "compile_s", "graph_breaks",
                "round_ms", "same_work_as")
"""Fields added after the first files were written: a file without them still loads, with the default."""
CASE_FIELDS = ("model", "flavour", "strategy", "gpus", "batch", "micro_batches", "schedule", "virtual_stages",
               "speeds", "max_memory", "settings", "precision", "optimizer", "checkpoint", "compile")
"""Every field that changes what runs. A new setting goes into `settings` (one entry where the suite
makes the row), or into a field of its own listed here."""


def case_key(row: Row) -> tuple:
    """What identifies a benchmark case, for `--resume` and the report: the CASE_FIELDS values. The same
    case with other `--set` values, another memory cap, other speeds, precision, optimizer, checkpoint
    or compile mode is another case."""
    return tuple(getattr(row, name) for name in CASE_FIELDS)


def settings_text(settings: dict[str, Any]) -> str:
    """{"width": 64, "depth": 4} -> "depth=4;width=64": sorted, so the same settings always key alike;
    list values joined with ","."""
    def text(value):
        return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return ";".join(f"{key}={text(settings[key])}" for key in sorted(settings))


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
    case runs only to lose its row."""
    for path in paths:
        if not path.exists():
            continue
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
    return _csv_table([_csv_cells(row) for row in rows])


def _csv_table(lines: list[tuple[str, ...]]) -> str:
    return csv_text(CSV_COLUMNS, lines)  # each cell spreadsheet-safe (pipebench/csvtext.py)


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
    from pipebench.files import read_text

    return read_text(path, kind="results", error=ResultsError)


def _load_json(path: Path) -> list[Row]:
    try:
        data = loads(_read_text(path))
    except UserError:  # _read_text's own line
        raise
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON: {exc}") from None
    except RecursionError:
        raise ResultsError(f"{path}: JSON nested too deeply to be a pipebench results file") from None
    except ValueError as exc:  # loads' bounds on numbers
        raise ResultsError(f"{path}: {exc}; not a pipebench results file") from None
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
    reader = csv_rows(_read_text(path))
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
    slug = re.sub(r"[^A-Za-z0-9._+]+", "-", str(text)).strip("-.")
    if not slug:
        raise ValueError(f"{what} {text!r} leaves nothing to name a results file with")
    return slug


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
    print(f"pipebench: warning: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- timelines

def _timeline_entry(where: str, op: Any) -> dict:
    if not isinstance(op, dict):
        raise ResultsError(f"{where}: expected an object, got {op!r}")
    entry = dict(op)
    for key, kind in TIMELINE_KEYS.items():
        if key not in op:
            raise ResultsError(f"{where}: missing key {key!r}")
        entry[key] = check(kind, op[key], f"{where}.{key}", error=ResultsError)
    for key in ("start_ms", "end_ms"):
        if abs(entry[key]) > MAX_FIGURE:
            raise ResultsError(f"{where}.{key}: {entry[key]:g} ms is not a time in a step (at most {MAX_FIGURE:g})")
    return entry

"""Train's `--csv` log as `pipebench report` shows it: the loss curve beside the throughput.

A train log is a CSV whose header is COLUMNS (bench/train/loop.py writes it, one row a step); `report`
given such files, or a folder holding them, draws them all into one PNG (`train.png`: loss against step
on the left, samples/s against step on the right, a line per log) and prints a line per log. matplotlib
is imported only when the plot is drawn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Sequence

from pipebench.base.errors import UserError

__all__ = ["COLUMNS", "TrainLog", "is_train_log", "has_train_header", "read_log", "summary_line", "draw_logs"]

COLUMNS = ("step", "epoch", "loss", "samples_per_s", "time_s")
"""The header of train's --csv, in its order."""
MAX_LOGS = 12
"""The most logs one plot draws (a legend beyond is unreadable); the others are named in a note."""


@dataclass(frozen=True)
class TrainLog:
    path: Path
    step: list[int]
    epoch: list[int]
    loss: list[float]
    samples_per_s: list[float]
    time_s: list[float]


def _header(path: Path) -> list[str] | None:
    from pipebench.base.fileio.csvtext import csv_rows
    from pipebench.base.fileio.files import read_text

    return next(csv_rows(read_text(path, kind="train log"), str(path)), None)


def is_train_log(path: Path) -> bool:
    """Whether `path` is a .csv file with train's header (what `report` reads as a train log)."""
    return Path(path).suffix == ".csv" and has_train_header(path)


def has_train_header(path: Path) -> bool:
    """Whether `path`'s first line is train's header, whatever its name (an unreadable or empty file has not):
    train's --csv takes any name."""
    try:
        return tuple(_header(Path(path)) or ()) == COLUMNS
    except UserError:
        return False


def read_log(path: str | Path) -> TrainLog:
    """A train log's steps; one UserError line naming the file and line for a cell that is no number."""
    from pipebench.base.fileio.csvtext import csv_rows
    from pipebench.base.fileio.files import read_text

    path = Path(path)
    rows = csv_rows(read_text(path, kind="train log"), str(path))
    header = next(rows, None)
    if tuple(header or ()) != COLUMNS:
        raise UserError(f"{path}: not a train log (expected the header {','.join(COLUMNS)})")
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for line, cells in enumerate(rows, start=2):
        if not cells:
            continue
        if len(cells) != len(COLUMNS):
            raise UserError(f"{path}: line {line}: {len(cells)} cells for {len(COLUMNS)} columns")
        for name, cell in zip(COLUMNS, cells):
            try:
                value = int(cell) if name in ("step", "epoch") else float(cell)
            except ValueError:
                raise UserError(f"{path}: line {line}: {name} {cell[:40]!r} is not a number") from None
            if name != "loss" and not (math.isfinite(value) and value >= 0):
                raise UserError(f"{path}: line {line}: {name} {cell[:40]!r} must be a finite number >= 0")
            columns[name].append(value)
    if not columns["step"]:
        raise UserError(f"{path}: a train log with no steps")
    return TrainLog(path, **columns)


def summary_line(log: TrainLog) -> str:
    """'pp.csv: 440 steps (20 epochs), loss 2.306 -> 0.0779 (lowest 0.0312), 1,983 samples/s median, 14.2 s'."""
    finite = [x for x in log.loss if math.isfinite(x)]
    lowest = f" (lowest {min(finite):.4g})" if finite else ""
    return (f"{log.path.name}: {len(log.step)} steps ({log.epoch[-1]} epoch{'s' if log.epoch[-1] != 1 else ''}), "
            f"loss {log.loss[0]:.4g} -> {log.loss[-1]:.4g}{lowest}, "
            f"{median(log.samples_per_s):,.0f} samples/s median, {log.time_s[-1]:.1f} s")


def draw_logs(logs: Sequence[TrainLog], path: Path, footer: str, notes: list[str]) -> Path:
    """One PNG: every log's loss against step (left) beside its samples/s against step (right)."""
    from matplotlib.figure import Figure

    from pipebench.bench.report.plots import _save

    if len(logs) > MAX_LOGS:
        notes.append(f"train.png: the first {MAX_LOGS} of {len(logs)} train logs drawn")
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    loss_ax, speed_ax = fig.subplots(1, 2)
    names = _labels([log.path for log in logs[:MAX_LOGS]])
    for log, name in zip(logs[:MAX_LOGS], names):
        loss_ax.plot(log.step, log.loss, linewidth=1, label=name)
        speed_ax.plot(log.step, log.samples_per_s, linewidth=0.8, label=name)
    loss_ax.set(xlabel="step", ylabel="loss", title="loss")
    speed_ax.set(xlabel="step", ylabel="samples/s", title="throughput")
    speed_ax.set_ylim(bottom=0)
    for ax in (loss_ax, speed_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path, footer)


def _labels(paths: Sequence[Path]) -> list[str]:
    """Each log's file name, or its path relative to the logs' common folder when two share a name."""
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    import os

    common = os.path.commonpath([str(p.resolve().parent) for p in paths])
    return [os.path.relpath(p.resolve(), common) for p in paths]

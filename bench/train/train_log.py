"""Rank 0's progress, step by step, as the user sees it: the recipe's log line, and a tqdm bar on a terminal.

A worker (loop.py) appends a row a step to progress.jsonl, and prints the log line itself where nobody
follows that file (a job written for torchrun); the parent (parent.py) follows it with `Progress`. The
line is made here for both, so that it reads the same whichever prints it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["log_line", "Progress"]


def log_line(row: dict) -> str:
    """The recipe's log line for one step's progress row."""
    return (f"Train Epoch: {row['epoch']} [{row['seen']}/{row['samples']}] Loss: {row['loss']:.3f}  "
            f"({row['samples_per_s']:.1f} samples/s)")


class Progress:
    """What rank 0 reports, step by step: the recipe's log line every `log_every` steps, and a tqdm bar
    (epoch, step, loss, samples/s, time left) when stderr is a terminal."""

    def __init__(self, path: Path, log_every: int, note):
        self.path, self.log_every, self.note = path, log_every, note
        self.offset = 0
        self.bar = None
        self.last: dict | None = None

    def poll(self) -> None:
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                text = f.read()
        except FileNotFoundError:
            return
        end = text.rfind("\n")
        if end < 0:
            return
        self.offset += len(text[:end + 1].encode())
        for line in text[:end + 1].splitlines():
            self.show(json.loads(line))

    def show(self, row: dict) -> None:
        self.last = row
        if self.log_every and (row["step"] % self.log_every == 0 or row["step"] == row["total"]):
            self.note(log_line(row))
        if sys.stderr.isatty():
            from tqdm import tqdm

            if self.bar is None:
                self.bar = tqdm(total=row["total"], unit="step", file=sys.stderr, dynamic_ncols=True)
            self.bar.set_description(f"epoch {row['epoch']}")
            self.bar.set_postfix(loss=f"{row['loss']:.3f}", samples_s=f"{row['samples_per_s']:.0f}")
            self.bar.n = row["step"]
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

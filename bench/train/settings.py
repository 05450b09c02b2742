"""What every worker of `pipebench train` trains by, as one record the parent writes and the workers read.

It crosses the process boundary as a JSON file, train.json: the parent writes it into the workers' folder
(parent.py `_launch`) or into --write-job's folder for torchrun to start on each node (`write_job`), and
each worker (loop.py) reads it back. The file is the record's fields by name, the data as its DataSpec's.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

__all__ = ["TrainSettings"]


@dataclass(frozen=True)
class TrainSettings:
    """The data, the length, the checkpoints and the log of a training, paths absolute (the workers start
    elsewhere; TrainOptions made them so)."""

    data: Any
    """A bench.train.data.DataSpec."""
    epochs: int = 1
    steps: int | None = None
    """Steps in all, instead of `epochs` where given."""
    lr: float | None = None
    """The optimizer's learning rate, instead of its own where given."""
    save: str | None = None
    save_every: int | None = None
    resume: bool = False
    csv: str | None = None
    loader_workers: int = 0
    """The DataLoader's worker processes."""
    print_every: int = 0
    """Steps between the log lines rank 0 prints itself (a job torchrun started, which no parent watches); 0
    for none."""

    def to_json(self) -> dict:
        """The record as train.json holds it."""
        return {**asdict(self), "data": asdict(self.data)}

    @classmethod
    def from_json(cls, obj: Any, where: str = "train.json") -> TrainSettings:
        """The record of train.json's object (`to_json`'s), checked as every record is read back
        (fileio.records `record`: no unknown key, none missing, each value of its field's type), so that a
        file edited by hand beside a written job is one UserError naming the field (`where`: the file)."""
        from pipebench.base.fileio.records import record
        from pipebench.bench.train.data import DataSpec

        settings = record(cls, obj, where, may_miss=(), nonnegative=True)
        return replace(settings, data=record(DataSpec, settings.data, f"{where}.data", may_miss=(), nonnegative=True))

    @classmethod
    def read(cls, path: Path) -> TrainSettings:
        """The record of the train.json file at `path` (`from_json`)."""
        from pipebench.base.fileio.files import read_json

        return cls.from_json(read_json(path, kind="train settings"), str(path))

    @classmethod
    def names(cls) -> set[str]:
        """The record's field names, the keys of its train.json: what tells a train.json train wrote."""
        return {f.name for f in fields(cls)}

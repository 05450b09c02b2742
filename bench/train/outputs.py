"""What a training writes, checked before any model file is imported and any work: the checkpoint (and its
training state folder PATH.train), the --csv log and --write-job's files.

`pipebench train` and `pipebench.train` check them here, so that the command line and the API refuse the
same paths with the same line.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from pipebench.base.errors import UserError

__all__ = ["TrainOutputs", "check_train_outputs"]


class TrainOutputs(NamedTuple):
    """The outputs checked, each absolute, or None where not asked."""

    save: str | None
    csv: str | None
    write_job: str | None


def check_train_outputs(save: str | None, csv: str | None, write_job: str | None, *, data: str, model: str) -> TrainOutputs:
    """--save (and its training state folder PATH.train), --csv and --write-job's job.json and train.json,
    checked together (files.writable_file) and made absolute. Regular files only: the workers append to
    --csv row by row and --resume reads --save back, which a FIFO would hang. PATH.train is a folder of
    train's own or nothing: a link there would have the state written into whatever it leads to (a user's
    folder), or fail at the first checkpoint if it leads nowhere. None may be another output, the --data
    file or the model file (files.same_outputs): the write would replace it; --data and --model may name
    one file, both read."""
    from pipebench.base.fileio.files import creatable_folder, same_outputs, writable_file

    outputs = {}
    if save is not None:  # not truthiness: --save '' taken as no --save would train and save nothing
        save = outputs["--save"] = str(writable_file(save, "--save", regular=True))
        state = Path(save + ".train")
        if state.is_symlink() or state.exists() and not state.is_dir():  # a link's target is no folder of train's
            what = "a link" if state.is_symlink() else "a file"
            raise UserError(f"--save {save}: {state} is in the way ({what}, where the training state's folder "
                            "goes); move it or name another --save")
    if csv is not None:
        csv = outputs["--csv"] = str(writable_file(csv, "--csv", regular=True))
    if write_job is not None:  # not truthiness: --write-job '' taken as none would train here instead
        folder = creatable_folder(os.path.expanduser(write_job), "--write-job")  # made when the job is written
        write_job = str(folder)
        _not_in_state_folder(folder, save)
        for name in ("job.json", "train.json"):
            if (folder / name).is_symlink():  # the write would go through it, into whatever it leads to
                raise UserError(f"--write-job {folder}: {name} is a link; remove it or name another folder")
            outputs[f"--write-job's {name}"] = str(writable_file(folder / name, f"--write-job {folder}:")
                                                   if folder.is_dir() else folder / name)
    same_outputs({"--data": _data_file(data), "--model": model_file(model)}, outputs)
    _not_another_file(save, csv)
    if write_job is not None:
        _not_another_job_file(Path(write_job))
    return TrainOutputs(save, csv, write_job)


def model_file(text: str | None) -> str | None:
    """The file of FILE.py:NAME (--model, train's --data), which no output may replace; None for a zoo name,
    a module or nothing given."""
    where, sep, _ = (text or "").rpartition(":")
    return os.path.expanduser(where) if sep and where.endswith(".py") else None


def _data_file(text: str) -> str | None:
    """The file --data reads (tokens:FILE, FILE.py:NAME), as parse_data takes it; None for a folder."""
    kind, sep, rest = text.partition(":")
    if sep and kind == "tokens" and rest:
        return os.path.expanduser(rest)
    return model_file(text)


def _torch_saved(path: str) -> bool:
    """Whether `path` is a zip in torch.save's layout (its pickle at `<name>/data.pkl`): any other zip, an
    archive of someone's, is not train's to replace with a checkpoint."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("/data.pkl") and name.count("/") == 1 for name in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _not_another_file(save: str | None, csv: str | None) -> None:
    """Refuse a --csv or --save that already holds something other than what train writes there: a train
    log (--csv) and a checkpoint, a zip as torch.save writes it (--save), are train's own to write again."""
    from pipebench.base.fileio.files import not_another_file
    from pipebench.bench.train.curves import COLUMNS, has_train_header

    not_another_file(csv, "--csv", has_train_header, f"a train log (header {','.join(COLUMNS)})")
    not_another_file(save, "--save", _torch_saved, "a checkpoint of torch.save's")


def _not_in_state_folder(folder: Path, save: str | None) -> None:
    """--write-job's folder is not --save's training state folder (PATH.train) or inside it: that folder is
    train's checkpoint state, which the job's files would mix with."""
    if save is None:
        return
    state = Path(os.path.realpath(save + ".train"))
    if Path(os.path.realpath(folder)) == state or state in Path(os.path.realpath(folder)).parents:
        raise UserError(f"--write-job {folder}: is inside --save's training state folder {state}; name another folder")


def _job_file(path: str) -> bool:
    """Whether `path` reads back as a Job (bench/launch/job.py), as --write-job writes job.json."""
    from pipebench.bench.launch.job import Job

    try:
        Job.load(path)
    except UserError:
        return False
    return True


def _train_settings_file(path: str) -> bool:
    """Whether `path` is a JSON object of the workers' settings, as --write-job writes train.json: the keys
    of a TrainSettings record, each of its fields."""
    from pipebench.base.fileio.files import read_json
    from pipebench.bench.train.settings import TrainSettings

    try:
        settings = read_json(path, kind="train settings")
    except UserError:
        return False
    return isinstance(settings, dict) and set(settings) == TrainSettings.names()


def _not_another_job_file(folder: Path) -> None:
    """Refuse a job.json or train.json in --write-job's folder that is not one train wrote there."""
    from pipebench.base.fileio.files import not_another_file

    not_another_file(folder / "job.json", f"--write-job {folder}:", _job_file, "a job train wrote")
    not_another_file(folder / "train.json", f"--write-job {folder}:", _train_settings_file,
                     "the training settings train wrote")

"""What `pipebench train --data` reads: a torch Dataset of (input, target) pairs, and its checks.

    mnist:DIR     torchvision's MNIST layout (DIR/MNIST/raw/*-ubyte, as --data-dir reads): images
                  normalised as the recipe does, (1, 28, 28) float, and the class id.
    tokens:FILE   a flat file of uint16 token ids (nanoGPT's train.bin), cut into consecutive sequences of
                  T tokens: input ids[i*T : i*T + T], target ids[i*T + 1 : i*T + T + 1].
    FILE.py:NAME  a function in FILE.py that returns a torch.utils.data.Dataset of (input, target).

Every problem a data set has (missing, empty, the wrong dtype, ids beyond the vocabulary, a sequence longer
than the data, NaN or infinite values, labels out of range in the SAMPLES_CHECKED samples read, more samples
than the free memory holds a sampler's order of) is a UserError line, found in the parent before any worker
starts (`check_data_fits_model`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from pipebench.base.errors import UserError
from pipebench.base.fileio.files import check_regular

__all__ = ["DataSpec", "parse_data", "token_length", "open_dataset", "TokenSequences", "MnistImages",
           "check_data_fits_model"]

KINDS = ("mnist", "tokens")
SAMPLES_CHECKED = 64
"""How many samples, spread evenly from the first to the last, `check_data_fits_model` reads for NaN,
infinite values and labels out of range: a bound on the time a check takes, whatever the data set's size."""
IGNORED_TARGET = -100
"""The target that cross_entropy ignores (its ignore_index): padding, not a label out of range."""
SAMPLER_BYTES = 64
"""Memory per sample that torch's DistributedSampler holds while it makes an epoch's order, in every process
that reads the data: the shuffled indices as an int64 tensor, then as a list of Python ints (a pointer and
an int object each), and the slices it takes of that list (48 bytes a sample measured at one replica, torch
2.14)."""


@dataclass(frozen=True)
class DataSpec:
    kind: str
    """mnist, tokens or file."""
    path: str
    """The folder or file, absolute (workers start elsewhere)."""
    name: str = ""
    """The function's name, for kind file."""
    seq_len: int | None = None
    """Tokens per sequence, for kind tokens."""

    def label(self) -> str:
        return f"{self.kind}:{self.path}" if self.kind != "file" else f"{self.path}:{self.name}"


def parse_data(text: str, seq_len: int | None = None) -> DataSpec:
    """--data mnist:DIR, tokens:FILE or FILE.py:NAME as a DataSpec (the path made absolute)."""
    kind, sep, rest = text.partition(":")
    if sep and kind in KINDS:
        if not rest:
            raise UserError(f"--data {text}: name the {'folder' if kind == 'mnist' else 'file'} after '{kind}:'")
        return DataSpec(kind, str(Path(rest).expanduser().resolve()), seq_len=seq_len)
    where, sep, name = text.rpartition(":")
    if sep and where.endswith(".py") and name.isidentifier():
        return DataSpec("file", str(Path(where).expanduser().resolve()), name)
    raise UserError(f"--data takes mnist:DIR, tokens:FILE or FILE.py:NAME (got {text[:60]!r})")


def token_length(model: str, flavour: str | None, overrides: dict) -> int | None:
    """The tokens a sample of a token file takes: --input-shape's one dimension, else gpt's own (its
    flavour's, or --set's); None for another model."""
    if "input_shape" in overrides and len(overrides["input_shape"]) == 1:
        return overrides["input_shape"][0]
    if model == "gpt":
        from pipebench import models

        return models.get_model("gpt", flavour, device="meta", **overrides).config["seq_len"]
    return None


class MnistImages(torch.utils.data.Dataset):
    """MNIST's training split as the recipe feeds it: (1, 28, 28) float images, normalised, and class ids."""

    batched_items = True
    """`__getitems__` gives the batch itself, stacked (bench/train/loop.py's loader collates nothing)."""

    def __init__(self, folder: str, train: bool = True):
        from pipebench.models.mnist import load_mnist

        self.images, self.labels = load_mnist(folder, train=train)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        images, labels = self.__getitems__([i])
        return images[0], labels[0]

    def __getitems__(self, indices):
        """A whole batch at once, normalised in one operation (the DataLoader's batched fetch: no
        per-sample Python, no collating)."""
        from pipebench.models.mnist import MEAN, STD

        picked = torch.as_tensor(indices)
        return ((self.images[picked].float() / 255 - MEAN) / STD).unsqueeze(1), self.labels[picked]

    def max_target(self) -> int:
        return int(self.labels.max())


class TokenSequences(torch.utils.data.Dataset):
    """Consecutive sequences of `seq_len` tokens of a flat uint16 file, each with its next tokens as targets.
    The file is memory-mapped: a 10 GB train.bin costs no memory until read."""

    batched_items = True

    def __init__(self, path: str, seq_len: int):
        import numpy as np

        file = Path(path)
        check_regular(file, kind="tokens", label=f"--data tokens:{path}")  # a FIFO: said as one, not as "no such file"
        size = file.stat().st_size
        if size == 0:
            raise UserError(f"--data tokens:{path}: the file is empty")
        if size % 2:
            raise UserError(f"--data tokens:{path}: {size:,} bytes is no whole number of uint16 token ids "
                            "(the file is not of dtype uint16)")
        self.ids = np.memmap(path, dtype=np.uint16, mode="r")
        self.seq_len = seq_len
        if len(self.ids) < seq_len + 1:
            raise UserError(f"--data tokens:{path}: a sequence of {seq_len} tokens (and its next one) is longer "
                            f"than the data's {len(self.ids):,} tokens")

    def __len__(self) -> int:
        return (len(self.ids) - 1) // self.seq_len

    def __getitem__(self, i):
        inputs, targets = self.__getitems__([i])
        return inputs[0], targets[0]

    def __getitems__(self, indices):
        """A whole batch at once: one gather from the memory-mapped file (the DataLoader's batched fetch)."""
        import numpy as np

        starts = np.asarray(indices, dtype=np.int64)[:, None] * self.seq_len
        chunks = torch.from_numpy(self.ids[starts + np.arange(self.seq_len + 1)].astype(np.int64))
        return chunks[:, :-1], chunks[:, 1:]

    def max_target(self) -> int:
        return int(self.ids.max())


def open_dataset(spec: DataSpec) -> torch.utils.data.Dataset:
    """The Dataset `spec` names; UserError for one that cannot be read."""
    if spec.kind == "mnist":
        return MnistImages(spec.path)
    if spec.kind == "tokens":
        if spec.seq_len is None:
            raise UserError("--data tokens:FILE needs a sequence length: --input-shape T, or a model with seq_len")
        return TokenSequences(spec.path, spec.seq_len)
    return _user_dataset(spec)


def _user_dataset(spec: DataSpec):
    """The Dataset the file's function returns. Its import and its call are the user's code, run as a model
    file's builder is (models/imports.py call_user): sys.exit(), os._exit(N) and an exception of any class
    are one line naming the file and what it did (sys.exit would end pipebench with the file's own code and
    no word); under the import's time limit, as a model file's import is (one that never returns would hang
    `train`)."""
    import importlib.util

    from pipebench.models.imports import call_user

    file = Path(spec.path)
    where = f"--data {spec.label()}"
    check_regular(file, kind="data", label=where)
    module_spec = importlib.util.spec_from_file_location(f"pipebench_data_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    rule = "a data file must not end the process"
    call_user(lambda: module_spec.loader.exec_module(module), where, "importing the file", "when imported", rule,
              limit=True)
    function = getattr(module, spec.name, None)
    if not callable(function):
        raise UserError(f"{where}: the file has no function {spec.name!r}")
    dataset = call_user(function, where, f"{spec.name}()", f"in {spec.name}()", rule, limit=True)
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise UserError(f"{where}: {spec.name}() returned a {type(dataset).__name__}, not a torch Dataset "
                        "with a length")
    return dataset


def _checked_samples(dataset, count: int, reading: list[str]) -> tuple[int | None, int | None]:
    """That SAMPLES_CHECKED samples of `dataset` (spread evenly, the first and the last among them) hold no NaN
    or infinite value, in their inputs or targets (a NaN input makes every loss NaN from the first step, and
    what the workers would train on is no number), and that the targets are numbers or tensors with values
    (a string or a meta tensor would raise a traceback in the checks after this one). Returns the lowest and highest
    integer target seen (None for targets of floats). `reading[0]` says which sample is being read, for
    check_data_fits_model's time limit."""
    import math

    picks = count if count <= SAMPLES_CHECKED else SAMPLES_CHECKED
    indices = sorted({round(k * (count - 1) / max(picks - 1, 1)) for k in range(picks)})
    labels: list[torch.Tensor] = []
    for i in indices:
        reading[0] = f"its sample {i}"
        try:
            sample = dataset[i]
            if isinstance(sample, dict):  # unpacked, a dict of two gives its keys; collated, no pair[1]
                raise TypeError(f"a dict of {', '.join(map(repr, list(sample)[:4]))}; return (input, target)")
            inputs, targets = sample
        except Exception as exc:  # noqa: BLE001 - the user's data set: its error in one line
            raise UserError(f"the data set's sample {i} is no (input, target) pair ({type(exc).__name__}: "
                            f"{str(exc)[:200]})") from None
        if not _tensors(targets) and not isinstance(targets, (int, float)):  # a class name: the loss's traceback
            raise UserError(f"the data set's sample {i} has a target of {type(targets).__name__} "
                            f"({repr(targets)[:60]}), not a tensor or number the loss takes")
        for part, value in (("input", inputs), ("target", targets)):
            for tensor in _tensors(value):
                if tensor.is_meta:  # shapes without values: nothing to train on (nor to check)
                    raise UserError(f"the data set's sample {i} has its {part} on the meta device, which holds "
                                    "no values; return tensors with data (on the CPU)")
                if tensor.is_floating_point() or tensor.is_complex():
                    if not bool(torch.isfinite(tensor).all()):
                        raise UserError(f"the data set's sample {i} has NaN or infinite values in its {part} "
                                        f"(shape {list(tensor.shape)}); train checks {picks} samples spread over "
                                        "the data set before it starts")
                elif part == "target" and tensor.dtype != torch.bool:
                    labels.append(tensor.flatten())
            if part == "target" and isinstance(value, float) and not math.isfinite(value):
                raise UserError(f"the data set's sample {i} has a target of {value}; train checks {picks} "
                                "samples spread over the data set before it starts")
            if part == "target" and isinstance(value, int) and not isinstance(value, bool):
                labels.append(torch.tensor([value]))
    labels = torch.cat(labels) if labels else torch.zeros(0, dtype=torch.long)
    labels = labels[labels != IGNORED_TARGET]
    return (int(labels.min()), int(labels.max())) if labels.numel() else (None, None)


def _check_sampler_memory(count: int) -> None:
    """That one process's sampler order of `count` samples (SAMPLER_BYTES each) fits the memory free here:
    beyond it the kernel ends the worker when its epoch starts. Checked before any sample is read."""
    from pipebench.hardware.free_memory import free_bytes
    from pipebench.base.text.units import format_bytes

    need, free = count * SAMPLER_BYTES, free_bytes("cpu")
    if need > free:
        raise UserError(f"the data set's {count:,} samples need about {format_bytes(need)} for the sampler's "
                        f"shuffled order in each process that reads them, more than the {format_bytes(free)} "
                        "free here (fewer samples: a smaller data set, or for tokens:FILE longer sequences)")


def _tensors(value) -> list[torch.Tensor]:
    """The tensors (and numpy arrays) in a sample's input or target, nested in tuples, lists or dicts."""
    if isinstance(value, torch.Tensor):
        return [value]
    if type(value).__module__ == "numpy" and getattr(value, "dtype", None) is not None and value.dtype.kind in "biufc":
        return [torch.as_tensor(value)]  # a numpy array or scalar, which the DataLoader turns into a tensor
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def check_data_fits_model(dataset, model, batch: int, replicas: int, label: str = "--data") -> str:
    """That `dataset` can train `model` at `batch`: not empty, at least one batch, an epoch's order that fits
    the memory free (_check_sampler_memory), samples that are
    (input, target) pairs the model's forward and loss take, targets within its classes or vocabulary, no
    NaN or infinite value (in the samples `_checked_samples` reads).
    Returns one line that says what the data is. A length that cannot be read (a __len__ that raises, or
    returns a negative number, which len() refuses) is one line too. The check is the user's code (the
    data set's `__len__` and `__getitem__`), so it has the time limit of a model file's import and first
    forward: one that never returns is one line naming `label` (the --data given) and what was being read,
    not a hang."""
    from pipebench.base.time_limit import import_seconds
    from pipebench.models.imports import too_late
    from pipebench.base.time_limit import time_limit

    seconds, reading = import_seconds(), ["its length"]

    def late() -> str:
        return too_late(label, f"reading {reading[0]}", seconds)

    with time_limit(seconds, late):
        return _check_data_fits_model(dataset, model, batch, reading)


def _check_data_fits_model(dataset, model, batch: int, reading: list[str]) -> str:
    try:
        count = len(dataset)
    except Exception as exc:  # noqa: BLE001 - the user's data set: its error in one line
        raise UserError(f"the data set's length cannot be read (len() raised {type(exc).__name__}: "
                        f"{str(exc)[:200]})") from None
    if count == 0:
        raise UserError("the data set is empty")
    if count < batch:
        raise UserError(f"the data set has {count:,} samples, fewer than one batch of {batch}")
    _check_sampler_memory(count)
    lowest, highest_label = _checked_samples(dataset, count, reading)
    reading[0] = "its first two samples"
    inputs, targets = dataset[0]
    from torch.utils.data import default_collate

    try:
        pair = default_collate([dataset[i] for i in range(min(2, count))])
    except Exception as exc:  # noqa: BLE001 - samples of two shapes, or of no type a batch is made of
        raise UserError(f"the data set's first two samples make no batch ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:200]})") from None
    module = model.module
    top = (dataset.max_target() if hasattr(dataset, "max_target")
           else highest_label if highest_label is not None else int(pair[1].max()))
    if isinstance(pair[0], torch.Tensor) and not pair[0].is_floating_point():  # token ids: the embedding's rows
        from pipebench.models.source import vocabulary

        vocab = vocabulary(module)
        highest = max(top, int(pair[0].max()))
        if vocab is not None and highest >= vocab:
            raise UserError(f"the data holds token id {highest}, beyond the model's {vocab} tokens (0-{vocab - 1})")
    reading[0] = f"{model.name}'s forward of its first two samples"
    try:
        with torch.no_grad():
            from pipebench.bench.strategies.micro_batches import as_args

            outputs = module(*as_args(pair[0]))
            classes = outputs.shape[-1]
            model.loss_fn(outputs, pair[1])
    except Exception as exc:  # noqa: BLE001
        shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
        raise UserError(f"the data's samples do not fit {model.name}: input {shape}: "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None
    what = "token id" if isinstance(dataset, TokenSequences) else "label"
    if lowest is not None and lowest < 0:
        raise UserError(f"the data holds {what} {lowest}, below 0 (the model's {classes} classes are 0-{classes - 1}; "
                        f"{IGNORED_TARGET} marks a target the loss ignores)")
    if not pair[1].is_floating_point() and top >= classes:
        raise UserError(f"the data holds {what} {top}, beyond the model's {classes} "
                        f"{'tokens' if what == 'token id' else 'classes'} (0-{classes - 1})")
    shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else "?"
    return f"{count:,} samples of {shape}, {count // batch:,} steps of {batch} an epoch"

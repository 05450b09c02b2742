"""What `pipebench train --data` reads: a torch Dataset of (input, target) pairs, and its checks.

    mnist:DIR     torchvision's MNIST layout (DIR/MNIST/raw/*-ubyte, as --data-dir reads): images
                  normalised as the recipe does, (1, 28, 28) float, and the class id.
    tokens:FILE   a flat file of uint16 token ids (nanoGPT's train.bin), cut into consecutive sequences of
                  T tokens: input ids[i*T : i*T + T], target ids[i*T + 1 : i*T + T + 1].
    FILE.py:NAME  a function in FILE.py that returns a torch.utils.data.Dataset of (input, target).

Every problem a data set has (missing, empty, the wrong dtype, ids beyond the vocabulary, a sequence longer
than the data) is a UserError line, found in the parent before any worker starts (`check_fits`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from pipebench.errors import UserError

__all__ = ["DataSpec", "parse_data", "open_dataset", "TokenSequences", "MnistImages", "check_fits"]

KINDS = ("mnist", "tokens")


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


class MnistImages(torch.utils.data.Dataset):
    """MNIST's training split as the recipe feeds it: (1, 28, 28) float images, normalised, and class ids."""

    def __init__(self, folder: str, train: bool = True):
        from pipebench.models.mnist import load_mnist

        self.images, self.labels = load_mnist(folder, train=train)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        from pipebench.models.mnist import MEAN, STD

        return ((self.images[i].float() / 255 - MEAN) / STD).unsqueeze(0), self.labels[i]

    def max_target(self) -> int:
        return int(self.labels.max())


class TokenSequences(torch.utils.data.Dataset):
    """Consecutive sequences of `seq_len` tokens of a flat uint16 file, each with its next tokens as targets.
    The file is memory-mapped: a 10 GB train.bin costs no memory until read."""

    def __init__(self, path: str, seq_len: int):
        import numpy as np

        file = Path(path)
        if not file.is_file():
            raise UserError(f"--data tokens:{path}: {'is a folder' if file.is_dir() else 'no such file'}")
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
        import numpy as np

        start = i * self.seq_len
        chunk = torch.from_numpy(np.asarray(self.ids[start:start + self.seq_len + 1], dtype=np.int64))
        return chunk[:-1], chunk[1:]

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
    import importlib.util

    file = Path(spec.path)
    where = f"--data {spec.label()}"
    if not file.is_file():
        raise UserError(f"{where}: no such file")
    module_spec = importlib.util.spec_from_file_location(f"pipebench_data_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: its error in one line
        raise UserError(f"{where}: importing the file failed ({type(exc).__name__}: {exc})") from None
    function = getattr(module, spec.name, None)
    if not callable(function):
        raise UserError(f"{where}: the file has no function {spec.name!r}")
    try:
        dataset = function()
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{where}: {spec.name}() failed ({type(exc).__name__}: {exc})") from None
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise UserError(f"{where}: {spec.name}() returned a {type(dataset).__name__}, not a torch Dataset "
                        "with a length")
    return dataset


def check_fits(dataset, model, batch: int, replicas: int) -> str:
    """That `dataset` can train `model` at `batch`: not empty, at least one batch, samples that are
    (input, target) pairs the model's forward and loss take, targets within its classes or vocabulary.
    Returns one line that says what the data is."""
    count = len(dataset)
    if count == 0:
        raise UserError("the data set is empty")
    if count < batch:
        raise UserError(f"the data set has {count:,} samples, fewer than one batch of {batch}")
    try:
        sample = dataset[0]
        inputs, targets = sample
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"a sample of the data set is no (input, target) pair ({type(exc).__name__}: {exc})") from None
    from torch.utils.data import default_collate

    pair = default_collate([dataset[i] for i in range(min(2, count))])
    module = model.module
    top = dataset.max_target() if hasattr(dataset, "max_target") else int(pair[1].max())
    if isinstance(pair[0], torch.Tensor) and not pair[0].is_floating_point():  # token ids: the embedding's rows
        from pipebench.models.source import vocabulary

        vocab = vocabulary(module)
        highest = max(top, int(pair[0].max()))
        if vocab is not None and highest >= vocab:
            raise UserError(f"the data holds token id {highest}, beyond the model's {vocab} tokens (0-{vocab - 1})")
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
    if not pair[1].is_floating_point() and top >= classes:
        what = "token id" if isinstance(dataset, TokenSequences) else "label"
        raise UserError(f"the data holds {what} {top}, beyond the model's {classes} "
                        f"{'tokens' if what == 'token id' else 'classes'} (0-{classes - 1})")
    shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else "?"
    return f"{count:,} samples of {shape}, {count // batch:,} steps of {batch} an epoch"

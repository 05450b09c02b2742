"""Real MNIST batches for the convnet, read from a local folder; pipebench never downloads.

`data_dir` is torchvision's `root`: the files live in `data_dir/MNIST/raw/` as the unpacked IDX
files `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte` and
`t10k-labels-idx1-ubyte` (torchvision checks all four even when only one split is read).
Anything missing or unreadable is a `UserError` with a one-line reason, which the CLI reports.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from pipebench.base.errors import UserError
from pipebench.models.synthetic import check_batch_size, seeded_generator

RAW_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MEAN, STD = 0.1307, 0.3081
"""The usual MNIST normalisation, as in the blog recipe (MNIST, 20 epochs)."""
IMAGE_SIZE = 28
CLASSES = 10


def _unusable(data_dir: str | Path, reason: str) -> UserError:
    return UserError(f"MNIST data in {str(data_dir)!r} is unusable: {reason} (pipebench never downloads data)")


def load_mnist(data_dir: str | Path, train: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(images (N, 28, 28) uint8, labels (N,) int64) of one split, via torchvision.datasets.MNIST."""
    raw_folder = Path(data_dir) / "MNIST" / "raw"
    if not Path(data_dir).is_dir():
        raise _unusable(data_dir, "not a folder" if Path(data_dir).exists() else "no such folder")
    from torchvision.datasets import MNIST  # imported here: listing the zoo needs no torchvision

    try:
        dataset = MNIST(root=str(data_dir), train=train, download=False)
    except Exception as error:  # torchvision raises RuntimeError, AssertionError, TypeError... for bad files
        missing = [name for name in RAW_FILES if not (raw_folder / name).is_file()]
        if missing:
            raise _unusable(data_dir, f"missing file {raw_folder / missing[0]}") from error
        raise _unusable(data_dir, f"cannot read the IDX files in {raw_folder} ({type(error).__name__}: {error})") from error
    images, labels = dataset.data, dataset.targets
    if images.ndim != 3 or tuple(images.shape[1:]) != (IMAGE_SIZE, IMAGE_SIZE):
        raise _unusable(data_dir, f"images have shape {tuple(images.shape)}, expected (N, 28, 28)")
    if len(images) == 0 or len(images) != len(labels):
        raise _unusable(data_dir, f"{len(images)} images but {len(labels)} labels")
    if labels.min() < 0 or labels.max() >= CLASSES:
        raise _unusable(data_dir, f"labels outside [0, {CLASSES})")
    return images, labels.long()


@dataclass(frozen=True)
class MnistBatches:
    """`make_batch` over real images: the first batch_size of a permutation seeded by `seed`.

    Images stay uint8 in memory and are normalised per batch to float (B, 1, 28, 28); a batch larger
    than the data set wraps around the permutation.
    """

    images: torch.Tensor = field(repr=False)  # N, 28, 28 uint8
    labels: torch.Tensor = field(repr=False)  # N int64

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        check_batch_size(batch_size)
        count = len(self.images)
        order = torch.randperm(count, generator=seeded_generator(seed))  # N
        picked = order[torch.arange(batch_size) % count]  # B
        images = (self.images[picked].float() / 255 - MEAN) / STD  # B, 28, 28
        return images.unsqueeze(1).to(device), self.labels[picked].to(device)  # B, 1, 28, 28 and B


def mnist_batches(data_dir: str | Path) -> MnistBatches:
    """Batches from the training split in `data_dir`; raises UserError if it is missing or broken."""
    return MnistBatches(*load_mnist(data_dir, train=True))

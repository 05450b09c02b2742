"""Seeded random batches, so a benchmark needs no data set and two processes see the same batch.

Batches are drawn on the CPU from their own `torch.Generator` (never the global RNG, and never a
device generator, whose streams differ between CPU and GPU) and only then moved to the device.
The makers are small dataclasses rather than closures so a `LayeredModel` can be pickled to workers.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from pipebench.base.errors import UserError


def seeded_generator(seed: int) -> torch.Generator:
    """A fresh CPU generator: the same seed always yields the same stream."""
    return torch.Generator(device="cpu").manual_seed(seed)


def check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise UserError(f"batch_size must be at least 1, got {batch_size}")


@dataclass(frozen=True)
class SyntheticImages:
    """Gaussian images (B, channels, size, size) and uniform class ids (B,) in [0, classes)."""

    channels: int
    image_size: int
    classes: int

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        check_batch_size(batch_size)
        generator = seeded_generator(seed)
        shape = (batch_size, self.channels, self.image_size, self.image_size)
        images = torch.randn(shape, generator=generator)  # B, C, S, S
        labels = torch.randint(0, self.classes, (batch_size,), generator=generator)  # B
        return images.to(device), labels.to(device)


@dataclass(frozen=True)
class SyntheticFeatures:
    """Gaussian feature vectors (B, features) and uniform class ids (B,) in [0, classes)."""

    features: int
    classes: int

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        check_batch_size(batch_size)
        generator = seeded_generator(seed)
        inputs = torch.randn((batch_size, self.features), generator=generator)  # B, F
        labels = torch.randint(0, self.classes, (batch_size,), generator=generator)  # B
        return inputs.to(device), labels.to(device)


@dataclass(frozen=True)
class SyntheticTokens:
    """Uniform token streams cut into inputs (B, T) and next-token targets (B, T), int64 in [0, vocab)."""

    vocab: int
    seq_len: int

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        check_batch_size(batch_size)
        generator = seeded_generator(seed)
        stream = torch.randint(0, self.vocab, (batch_size, self.seq_len + 1), generator=generator)  # B, T+1
        return stream[:, :-1].contiguous().to(device), stream[:, 1:].contiguous().to(device)

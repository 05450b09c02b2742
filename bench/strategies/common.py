"""What every strategy shares: the optimizer step, micro-batch splitting, and peak memory per device."""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from models.base import LayeredModel

LEARNING_RATE = 0.1
"""Plain SGD, as DESIGN.md's figures were measured; large enough that a wrong gradient shows."""


class UnavailableStrategy(NotImplementedError):
    """The strategy cannot run here (a schedule the installed torch lacks, no GPU); the reason says why."""


class Trainer:
    """One optimizer step on a global batch; subclasses place the model and run forward/backward."""

    name = "trainer"

    def __init__(self, model: LayeredModel, devices: Sequence[str | torch.device], *, lr: float = LEARNING_RATE):
        self.model = model
        self.devices = [torch.device(d) for d in devices]
        self.lr = lr
        self.first_loss: float | None = None
        self._optimizer: torch.optim.Optimizer | None = None

    def parameters(self) -> list[nn.Parameter]:
        raise NotImplementedError

    def forward_backward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Accumulate the gradients of the batch-mean loss; return that loss (a tensor on any device)."""
        raise NotImplementedError

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """Zero gradients, forward and backward over the whole batch, one SGD step; returns the loss."""
        if self._optimizer is None:  # made on first use, once a subclass has placed its parameters
            self._optimizer = torch.optim.SGD(self.parameters(), lr=self.lr)
        self._optimizer.zero_grad(set_to_none=True)
        loss = self.forward_backward(inputs, targets)
        self._optimizer.step()
        value = float(loss.detach())
        if self.first_loss is None:
            self.first_loss = value
        return value

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Parameters by their name in the original model, on the CPU (to compare strategies)."""
        names = {id(p): n for n, p in self.model.layers.named_parameters()}
        return {names[id(p)]: p.detach().cpu() for p in self.parameters() if id(p) in names}

    def peak_memory(self) -> list[int]:
        """Peak bytes allocated on each device since the trainer was made (0 for the CPU)."""
        return [torch.cuda.max_memory_allocated(d) if d.type == "cuda" else 0 for d in self.devices]

    def reset_peak_memory(self) -> None:
        for d in self.devices:
            if d.type == "cuda":
                torch.cuda.reset_peak_memory_stats(d)


def own_copy(model: LayeredModel) -> LayeredModel:
    """A deep copy, so strategies never share (and never move) the caller's parameters."""
    return copy.deepcopy(model)


def split(tensor: torch.Tensor, chunks: int) -> list[torch.Tensor]:
    """Equal micro-batches along dimension 0; an uneven split is an error, not a silent remainder."""
    if chunks < 1 or tensor.shape[0] % chunks:
        raise ValueError(f"batch {tensor.shape[0]} does not split into {chunks} equal micro-batches")
    return list(tensor.chunk(chunks))

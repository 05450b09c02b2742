"""What every strategy shares: the optimizer step, micro-batch splitting, and peak memory per device."""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from pipebench.errors import UserError
from pipebench.models.base import LayeredModel

LEARNING_RATE = 0.1
"""Plain SGD, as the published figures were measured; large enough that a wrong gradient shows."""


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

    @classmethod
    def from_plan(cls, model: LayeredModel, devices: Sequence[torch.device], plan, strategy: str) -> "Trainer":
        """The trainer for this process's share of a Plan (None for strategies without one), running
        `strategy` (a registry name): every cut, placement and micro-batch count comes from the Plan,
        none is decided here. `devices`: the devices this process drives."""
        return cls(model, devices)

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


def check_plan_fits(plan, model: LayeredModel) -> None:
    """The Plan must cut the model it runs: a plan made for another version of the model is refused."""
    if plan.bounds[-1] != len(model):
        raise UserError(f"the plan cuts {plan.bounds[-1]} layers but {model.name} has {len(model)}; "
                        "plan again for this version of the model")


def own_copy(model: LayeredModel) -> LayeredModel:
    """A deep copy, so strategies never share (and never move) the caller's parameters."""
    return copy.deepcopy(model)


def split(tensor: torch.Tensor, chunks: int) -> list[torch.Tensor]:
    """Equal micro-batches along dimension 0; an uneven split is an error, not a silent remainder."""
    if chunks < 1 or tensor.shape[0] % chunks:
        raise ValueError(f"batch {tensor.shape[0]} does not split into {chunks} equal micro-batches")
    return list(tensor.chunk(chunks))

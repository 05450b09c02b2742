"""The Trainer bases every strategy builds on: one optimizer step on a global batch, under the Training's
precision, optimizer and compile mode; the whole-model and replica forms; and how a trainer takes its own
copy of the model (or the model itself, handed over)."""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from pipebench.bench.strategies.checkpointing import CHECKPOINT_WRAPPER
from pipebench.bench.strategies.micro_batches import as_args, split, to_device
from pipebench.base.training import Training, autocast, compile_module, make_optimizer

__all__ = ["UnavailableStrategy", "Trainer", "WholeModelTrainer", "ReplicaTrainer", "own_copy", "hand_over"]


class UnavailableStrategy(NotImplementedError):
    """The strategy cannot run here (a schedule the installed torch lacks, no GPU); the reason says why."""


class Trainer:
    """One optimizer step on a global batch; subclasses place the model and run forward/backward.

    Every Trainer is built the same way, `Trainer(model, devices, plan=, strategy=, training=)`: this
    process's share of `plan` (None for strategies without one), running `strategy` (its registry entry)
    the way `training` says. Every cut, placement, micro-batch count and recomputed stage comes from the
    Plan, none is decided here. `devices`: the devices this process drives (one for a process per
    device)."""

    def __init__(self, model, devices: Sequence[str | torch.device], *, plan=None, strategy=None,
                 training: Training = Training()):
        self.model = model
        self.devices = [torch.device(d) for d in devices]
        self.plan = plan
        self.strategy = strategy
        self.training = training
        self.first_loss: float | None = None
        self._optimizer: torch.optim.Optimizer | None = None

    def compile(self, module: nn.Module) -> nn.Module:
        """Compile `module` in place as the Training says (eager: nothing); each strategy compiles what it
        runs: the model, its replica, each shard unit or each stage."""
        return compile_module(module, self.training)

    def make_optimizer(self) -> torch.optim.Optimizer:
        """The optimizer over this process's parameters, as the Training says."""
        return make_optimizer(self.parameters(), self.training)

    def parameters(self) -> list[nn.Parameter]:
        raise NotImplementedError

    def forward_backward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Accumulate the gradients of the batch-mean loss; return that loss (a tensor on any device)."""
        raise NotImplementedError

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """Zero gradients, forward and backward over the whole batch, one optimizer step; returns the
        loss. The forward and backward run under the precision's autocast: torch's pipeline schedules
        run both inside one call, so every strategy does the same (autocast leaves backward ops in the
        dtypes their forward chose)."""
        if self._optimizer is None:  # made on first use, once a subclass has placed its parameters
            self._optimizer = self.make_optimizer()
        self._optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.forward_backward(inputs, targets)
        self._optimizer.step()
        value = float(loss.detach())
        if self.first_loss is None:
            self.first_loss = value
        return value

    def autocast(self):
        """The precision's autocast context (bf16), or none."""
        return autocast(self.training, self.devices[0].type)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Parameters by their name in the original model, on the CPU (to compare strategies). A stage's
        replica of a parameter shared by several stages has the original's name too."""
        names = {id(p): n.replace(f"{CHECKPOINT_WRAPPER}.", "") for n, p in self.model.module.named_parameters()}
        replicas = {id(p): n for group in getattr(self, "shared", []) for _, n, p in group}
        names.update(replicas)
        # A stage may still hold the tied original, unused, beside its trained copy: the copy wins.
        ordered = sorted(self.parameters(), key=lambda p: id(p) in replicas)
        return {names[id(p)]: p.detach().cpu() for p in ordered if id(p) in names}

    def peak_memory(self) -> list[int]:
        """Peak bytes allocated on each device since the trainer was made or `reset_peak_memory` (the
        worker resets after the warm-up steps: the steady state's peak, not cuDNN's autotuning, which
        tries algorithms with large workspaces in the first steps and falls back where they do not fit).
        0 for the CPU."""
        return [torch.cuda.max_memory_allocated(d) if d.type == "cuda" else 0 for d in self.devices]

    def reset_peak_memory(self) -> None:
        for d in self.devices:
            if d.type == "cuda":
                torch.cuda.reset_peak_memory_stats(d)


class WholeModelTrainer(Trainer):
    """A strategy that calls the whole model in one piece (single, DataParallel, device-map): `runner`
    (the module itself, or a wrapper around it) takes the batch on the first device; the loss is taken
    where the output lands."""

    @property
    def runner(self):
        return self.model.module

    def parameters(self):
        return list(self.model.module.parameters())

    def forward_backward(self, inputs, targets):
        outputs = self.runner(*as_args(to_device(inputs, self.devices[0])))
        loss = self.model.loss_fn(outputs, targets.to(outputs.device))
        del outputs  # what the loss saved is enough: kept, a language model's logits outlive the backward
        loss.backward()
        return loss


class ReplicaTrainer(WholeModelTrainer):
    """One process per device, each running the whole model (DDP's replica, FSDP's shards) on its equal
    slice of the global batch. Every process makes the same batch from the same seed and takes its own
    slice, so the averaged gradient is the whole batch's, as on one device; the loss returned is the
    mean of the slices' mean losses (the batch mean). Subclasses set rank and world."""

    rank: int
    world: int
    local_batch = False
    """True: `step` is given this replica's own share of the batch (`pipebench train`'s DistributedSampler),
    not the global batch to slice."""

    def forward_backward(self, inputs, targets):
        if not self.local_batch:
            inputs, targets = split(inputs, self.world)[self.rank], split(targets, self.world)[self.rank]
        loss = super().forward_backward(inputs, targets)
        total = loss.detach().float().clone()
        torch.distributed.all_reduce(total)
        return total / self.world


def own_copy(model):
    """A deep copy, so strategies never share (and never move) the caller's parameters; or the model
    itself, once, when its owner handed it over (`hand_over`): a worker's 8B model is not copied."""
    if getattr(model, "handed_over", False):
        model.handed_over = False
        return model
    return copy.deepcopy(model)


def hand_over(model):
    """Let the next trainer take `model` itself rather than a copy (the worker builds it for that alone)."""
    model.handed_over = True
    return model

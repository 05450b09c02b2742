"""Your own loop: the pieces `pipebench train` uses, for a training script that runs under torchrun.

    part = this_rank(model, plan, "pp-1f1b")         # this process's stages of the Plan, ready to step
    for epoch in range(epochs):
        for inputs, targets in part.batches(dataset, epoch):   # DistributedSampler order; None where unread
            loss = part.step(inputs, targets)        # the plan's schedule: one optimizer step, the batch's loss
    state = part.state_dict()                        # the whole model's, on rank 0 (None elsewhere)

`model` is what models.get_model builds (a zoo model or a UserModel); the process group must be initialised
first (torchrun, then dist.init_process_group) for strategies with a process per device.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["Part", "this_rank"]


@dataclass
class Part:
    """This process's share of a strategy on a Plan: its Trainer (`stages`: its own modules of the split)."""

    trainer: Any
    strategy: Any
    batch: int
    seed: int = 0

    @property
    def rank(self) -> int:
        return dist.get_rank() if self.strategy.process_per_device else 0

    @property
    def stages(self) -> list[torch.nn.Module]:
        """The modules this process runs: its stages of the split, or the whole model."""
        return list(getattr(self.trainer, "modules", [self.trainer.model.module]))

    def step(self, inputs, targets) -> float:
        return self.trainer.step(inputs, targets)

    def batches(self, dataset, epoch: int, *, skip: int = 0, workers: int = 0):
        """The epoch's batches for this process (each sample once per epoch across the replicas), moved to its
        device; a pipeline's stages between the first and the last get (None, None)."""
        from pipebench.bench.train.loop import loader, reads_data, replica_of

        world = dist.get_world_size() if self.strategy.process_per_device else 1
        replicas, replica = replica_of(self.trainer, self.strategy, self.rank, world)
        steps = len(dataset) // self.batch - skip
        if not reads_data(self.trainer, self.rank):
            for _ in range(steps):
                yield None, None
            return
        device = self.trainer.devices[0]
        for inputs, targets in loader(dataset, self.batch // replicas, replicas, replica, seed=self.seed, epoch=epoch,
                                      skip_batches=skip, workers=workers, pin=device.type == "cuda"):
            yield inputs.to(device), targets.to(device)

    def state_dict(self) -> dict[str, torch.Tensor] | None:
        """The whole model's state_dict with its own names, on rank 0 (a collective: every process calls it)."""
        from pipebench.bench.train.checkpoint import model_state

        return model_state(self.trainer, self.strategy.process_per_device)


def this_rank(model, plan, strategy: str, *, training=None, lr: float | None = None, device: str = "cpu",
              local_rank: int = 0) -> Part:
    """This process's Part of `strategy` running `plan` (a pipebench.Plan; None for strategies without one)."""
    from pipebench.bench.launch.job import Job
    from pipebench.bench.strategies import get_strategy
    from pipebench.bench.strategies.trainers import hand_over
    from pipebench.bench.launch.worker import build_trainer
    from pipebench.base.training import Training

    training = training or Training("fp32")
    kind = get_strategy(strategy)
    world = dist.get_world_size() if kind.process_per_device else 1
    settings = dict(device_type=device, training=training)
    job = (Job.from_plan(plan, strategy, **settings) if plan is not None and kind.needs_plan
           else Job(model=model.name, strategy=strategy, batch=plan.batch if plan is not None else 0, devices=world,
                    **settings))
    trainer = build_trainer(job, hand_over(model), local_rank)
    trainer.local_batch = True
    trainer._optimizer = trainer.make_optimizer()
    if lr is not None:
        for group in trainer._optimizer.param_groups:
            group["lr"] = lr
    return Part(trainer, kind, job.batch)

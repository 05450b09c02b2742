"""GPipe in one process: the Plan's stages on their devices, the batch cut into micro-batches.

Forwards are issued in clock cycles (torchgpipe's order: at tick k, stage s runs micro-batch k - s), so
that while stage 1 works on micro-batch i, stage 0 already works on i + 1: CUDA launches are
asynchronous and each device runs its own stream. The backward of all micro-batches is one autograd
call; autograd runs each device's part on that device's own thread, so backwards overlap too.

    tick:     0    1    2    3    4
    stage 0:  F0   F1   F2   F3
    stage 1:       F0   F1   F2   F3

BatchNorm normalises over each micro-batch, not the whole batch, so a model with BatchNorm trains
slightly differently with m > 1 micro-batches (as in GPipe and torchgpipe); with m = 1 it is the same.
"""
from __future__ import annotations

import torch

from pipebench.bench.strategies.common import check_plan_fits, split
from pipebench.bench.strategies.modelparallel import ModelParallelTrainer


def clock_cycles(micro_batches: int, stages: int) -> list[list[tuple[int, int]]]:
    """For each tick, the (micro-batch, stage) pairs that may run at once."""
    return [
        [(k - s, s) for s in range(stages) if 0 <= k - s < micro_batches]
        for k in range(micro_batches + stages - 1)
    ]


class PipelineTrainer(ModelParallelTrainer):
    name = "pipeline"

    def __init__(self, model, devices, *, bounds, micro_batches, **kw):
        super().__init__(model, devices, bounds=bounds, **kw)
        self.micro_batches = micro_batches

    @classmethod
    def from_plan(cls, model, devices, plan, strategy):
        check_plan_fits(plan, model)
        return cls(model, devices, bounds=plan.bounds, micro_batches=plan.micro_batches)

    def forward_backward(self, inputs, targets):
        m = self.micro_batches
        xs = split(inputs, m)
        ys = split(targets, m)
        last = len(self.stages) - 1
        for tick in clock_cycles(m, len(self.stages)):
            for i, s in tick:
                xs[i] = self.stages[s](xs[i].to(self.devices[s], non_blocking=True))
        out_device = self.devices[last]
        # Each micro-batch's loss is a mean over its samples: scale by 1/m so the gradients add up to
        # those of the batch mean.
        losses = [self.model.loss_fn(x, y.to(out_device)) / m for x, y in zip(xs, ys)]
        total = torch.stack(losses).sum()
        total.backward()
        return total

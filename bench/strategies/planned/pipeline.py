"""GPipe in one process: the Plan's stages on their devices, the batch cut into micro-batches.

The micro-batches go through the split graph one after another; CUDA launches are asynchronous and
each device runs its own stream, so while the last stage works on micro-batch i, the first already
works on i + 1. The backward of all micro-batches is one autograd call; autograd runs each device's part
on that device's own thread, so backwards overlap too.

BatchNorm normalises over each micro-batch, not the whole batch, so a model with BatchNorm trains
slightly differently with m > 1 micro-batches (as in GPipe and torchgpipe); with m = 1 it is the same.
"""
from __future__ import annotations

import torch

from pipebench.bench.strategies.micro_batches import split
from pipebench.bench.strategies.planned.modelparallel import ModelParallelTrainer


class PipelineTrainer(ModelParallelTrainer):
    def __init__(self, model, devices, *, plan, **kw):
        super().__init__(model, devices, plan=plan, **kw)
        self.micro_batches = plan.micro_batches

    def forward_backward(self, inputs, targets):
        m = self.micro_batches
        outputs = [self.forward(x) for x in split(inputs, m)]
        # Each micro-batch's loss is a mean over its samples: scale by 1/m so the gradients add up to
        # those of the batch mean.
        losses = [self.model.loss_fn(out, y.to(out.device)) / m for out, y in zip(outputs, split(targets, m))]
        total = torch.stack(losses).sum()
        total.backward()
        self.sum_shared()
        return total

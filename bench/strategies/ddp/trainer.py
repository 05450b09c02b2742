"""DistributedDataParallel: one process per device, each with a whole replica and an equal share of the
global batch; gradients are averaged across processes during the backward.

Every process makes the same global batch from the same seed and takes its own slice, so the averaged
gradient is that of the whole batch's mean loss, as on one device. BatchNorm normalises each process's
slice on its own (as it does each micro-batch in a pipeline), so models with BatchNorm differ slightly.
"""
from __future__ import annotations

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from pipebench.bench.strategies.checkpointing import checkpoint_layers
from pipebench.bench.strategies.trainers import ReplicaTrainer, own_copy


class DDPTrainer(ReplicaTrainer):
    def __init__(self, model, devices, **kw):
        """devices: this process's device; the process group must already be initialised."""
        super().__init__(own_copy(model), devices[:1], **kw)
        if self.training.checkpoint == "always":
            checkpoint_layers(self.model)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.compile(self.model.module.to(self.devices[0]))  # the module inside DDP, as torch's docs compile it
        ids = [self.devices[0].index] if self.devices[0].type == "cuda" else None
        self.replica = DistributedDataParallel(self.model.module, device_ids=ids)

    @property
    def runner(self):
        return self.replica

"""ZeRO-1: DistributedDataParallel whose optimizer states are sharded over the replicas.

Each process keeps a whole replica and trains on its equal slice of the global batch, as DDP does
(bench/strategies/ddp/trainer.py); torch's `ZeroRedundancyOptimizer` gives each process the optimizer (the
Training's own: SGD or AdamW, with its settings) for about 1/p of the parameters only. After each
process has stepped its share, every shard is broadcast to the other replicas, so that all of them hold
the whole updated model again (Rajbhandari et al., ZeRO, 2020, stage 1: "optimizer state partitioning").
Each shard goes out as one bucket (`parameters_as_bucket_view`): torch's default broadcasts every
parameter tensor on its own, and on gloo those calls' fixed costs double a step (resnet101 tiny: 172 ms
against DDP's 84; 89 in buckets).

The update is the same as one device's: the gradients are the whole batch's mean (DDP's all-reduce) and
every parameter is stepped once, by its owner. Its price is this package's price_zero1 (price.py): this module imports torch, which advise does not
wait for.
"""
from __future__ import annotations

from pipebench.bench.strategies.ddp.trainer import DDPTrainer
from pipebench.base.training import optimizer_settings

__all__ = ["Zero1Trainer"]


class Zero1Trainer(DDPTrainer):
    """DDP's replica and its all-reduce; the optimizer steps this process's shard of the parameters."""

    def make_optimizer(self):
        from torch.distributed.optim import ZeroRedundancyOptimizer

        cls, settings = optimizer_settings(self.parameters(), self.training)
        return ZeroRedundancyOptimizer(self.parameters(), optimizer_class=cls, parameters_as_bucket_view=True,
                                       **settings)

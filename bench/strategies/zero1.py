"""ZeRO-1: DistributedDataParallel whose optimizer states are sharded over the replicas.

Each process keeps a whole replica and trains on its equal slice of the global batch, as DDP does
(bench/strategies/ddp.py); torch's `ZeroRedundancyOptimizer` gives each process the optimizer (the
Training's own: SGD or AdamW, with its settings) for about 1/p of the parameters only. After each
process has stepped its share, every shard is broadcast to the other replicas, so that all of them hold
the whole updated model again (Rajbhandari et al., ZeRO, 2020, stage 1: "optimizer state partitioning").

The update is the same as one device's: the gradients are the whole batch's mean (DDP's all-reduce) and
every parameter is stepped once, by its owner.
"""
from __future__ import annotations

from pipebench.bench.advise import Prediction, replica_prediction, replica_profiles
from pipebench.bench.strategies.ddp import DDPTrainer
from pipebench.partition import costs
from pipebench.partition.plan import recomputing, unmodelled_bytes
from pipebench.partition.profile import calibration
from pipebench.training import optimizer_settings

__all__ = ["Zero1Trainer", "price"]


class Zero1Trainer(DDPTrainer):
    """DDP's replica and its all-reduce; the optimizer steps this process's shard of the parameters."""

    def make_optimizer(self):
        from torch.distributed.optim import ZeroRedundancyOptimizer

        cls, settings = optimizer_settings(self.parameters(), self.training)
        return ZeroRedundancyOptimizer(self.parameters(), optimizer_class=cls, **settings)


def price(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """DDP's step (partition/costs.py ddp_step) plus the broadcast of the updated shards after it, which
    moves what an all-gather of the parameters does (costs.gather_ms); DDP's memory with the optimizer's
    states divided over the p replicas."""
    p = len(devices)
    by_count = replica_profiles(strategy, profiles, p)
    if isinstance(by_count, Prediction):
        return by_count
    layers = by_count[p].layers
    params = sum(l.param_bytes for l in layers)
    states = -(-params * training.states // p)  # this replica's share of the optimizer's states
    unmodelled = unmodelled_bytes(profiles, by_count[p].micro_batch)

    def step(recompute: bool):  # recompute: every layer's forward runs again in the backward
        priced = [recomputing(l) for l in layers] if recompute else layers
        return (costs.ddp_step(priced, p, links, scale=calibration(list(profiles))) + costs.gather_ms(params, p, links),
                [costs.replica_memory(layers, 2, extra_param_copies=1 if p > 1 else 0, recompute=recompute)
                 + states + unmodelled] * p)
    return replica_prediction(strategy, step, profiles[0].batch, caps, speeds, training)

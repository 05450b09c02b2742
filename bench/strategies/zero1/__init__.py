"""ZeRO-1 (DDP with ZeroRedundancyOptimizer), its home: the price here (no torch), the Trainer in
trainer.py. Priced as DDP's step plus the broadcast of the updated shards.
"""
from __future__ import annotations

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import replica_prediction, replicas_of
from pipebench.partition import costs
from pipebench.partition.memory import recomputing, unmodelled_bytes
from pipebench.partition.profile import calibration

__all__ = ["price_zero1"]

def price_zero1(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """ZeRO-1 (trainer.py): DDP's step (partition/costs.py ddp_step) plus the broadcast of the
    updated shards after it, which moves what an all-gather of the parameters does (costs.gather_ms); DDP's
    memory with the optimizer's states divided over the p replicas."""
    replicas = replicas_of(strategy, profiles, devices)
    if isinstance(replicas, Prediction):
        return replicas
    p, layers, unmodelled = replicas.p, replicas.layers, replicas.unmodelled
    params = sum(l.param_bytes for l in layers)
    states = -(-params * training.states // p)  # this replica's share of the optimizer's states

    def step(recompute: bool):  # recompute: every layer's forward runs again in the backward
        priced = [recomputing(l) for l in layers] if recompute else layers
        return (costs.ddp_step(priced, p, links, scale=calibration(list(profiles))) + costs.gather_ms(params, p, links),
                [costs.replica_memory(layers, 2, extra_param_copies=1 if p > 1 else 0, recompute=recompute)
                 + states + unmodelled] * p)
    return replica_prediction(strategy, step, profiles[0].batch, caps, speeds, training)

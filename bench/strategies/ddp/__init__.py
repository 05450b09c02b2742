"""DistributedDataParallel, its home: the price here (no torch, for the registry and advise), the
Trainer in trainer.py. Priced by partition/costs.py's ddp_step, the replicas' shared cost model (ZeRO-1
and the hybrid's all-reduce build on it too).
"""
from __future__ import annotations

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import replica_prediction, replicas_of
from pipebench.partition import costs
from pipebench.partition.memory import recomputing, unmodelled_bytes
from pipebench.partition.profile import calibration

__all__ = ["price_ddp"]

def price_ddp(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """DDP: every device runs the whole model on batch / p samples, its gradients all-reduced in buckets
    during the backward (partition/costs.py ddp_step)."""
    replicas = replicas_of(strategy, profiles, devices)
    if isinstance(replicas, Prediction):
        return replicas
    p, layers, unmodelled = replicas.p, replicas.layers, replicas.unmodelled
    states = 2 + training.states

    def price(recompute: bool):  # recompute: every layer's forward runs again in the backward
        priced = [recomputing(l) for l in layers] if recompute else layers
        return (costs.ddp_step(priced, p, links, scale=calibration(list(profiles))),
                [costs.replica_memory(layers, states, extra_param_copies=1 if p > 1 else 0,
                                      recompute=recompute) + unmodelled] * p)
    return replica_prediction(strategy, price, profiles[0].batch, caps, speeds, training)

"""DistributedDataParallel, its home: the price here (no torch, for the registry and advise), the
Trainer in trainer.py. Priced by partition/planning/costs.py's ddp_step, the replicas' shared cost model (ZeRO-1
and the hybrid's all-reduce build on it too).
"""
from __future__ import annotations

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing, Replicas, price_replicas
from pipebench.partition.planning import costs
from pipebench.partition.planning.memory import recomputing

__all__ = ["price_ddp"]

def price_ddp(pricing: Pricing) -> Prediction:
    """DDP: every device runs the whole model on batch / p samples, its gradients all-reduced in buckets
    during the backward (partition/planning/costs.py ddp_step)."""
    states = 2 + pricing.training.states

    def cost(replicas: Replicas, recompute: bool):  # recompute: every layer's forward runs again in the backward
        p, layers = replicas.p, replicas.layers
        priced = [recomputing(l) for l in layers] if recompute else layers
        return (costs.ddp_step(priced, p, pricing.links, scale=pricing.calibration),
                [costs.replica_memory(layers, states, extra_param_copies=1 if p > 1 else 0,
                                      recompute=recompute) + replicas.unmodelled] * p)
    return price_replicas(pricing, cost)

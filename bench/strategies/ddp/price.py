"""DistributedDataParallel's price (no torch, for the registry and advise): its cost model is cost.py's
`ddp_step`."""
from __future__ import annotations

from pipebench.bench.strategies.ddp.cost import ddp_memory, ddp_step
from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing, Replicas, price_replicas
from pipebench.partition.planning.memory import recomputing

__all__ = ["price_ddp"]

def price_ddp(pricing: Pricing) -> Prediction:
    """DDP: every device runs the whole model on batch / p samples, its gradients all-reduced in buckets
    during the backward (cost.py ddp_step)."""

    def cost(replicas: Replicas, recompute: bool):  # recompute: every layer's forward runs again in the backward
        p, layers = replicas.p, replicas.layers
        priced = [recomputing(l) for l in layers] if recompute else layers
        states = sum(l.param_bytes for l in layers) * pricing.training.states  # the optimizer's, whole
        return (ddp_step(priced, p, pricing.links, scale=pricing.calibration),
                [ddp_memory(layers, p, states, recompute=recompute) + replicas.unmodelled] * p)
    return price_replicas(pricing, cost)

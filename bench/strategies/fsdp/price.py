"""FSDP2's price (no torch): its cost model is cost.py's `fsdp_step` and `fsdp_memory`."""
from __future__ import annotations

from pipebench.bench.strategies.fsdp.cost import fsdp_blocks, fsdp_memory, fsdp_step
from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing, Replicas, price_replicas

__all__ = ["price_fsdp"]

def price_fsdp(pricing: Pricing) -> Prediction:
    """FSDP2: every device runs the whole model on batch / p samples, as DDP, with 1/p of the parameters,
    gradients and optimizer states, gathering each layer's parameters for its forward and backward
    (cost.py fsdp_step, fsdp_memory). bf16 when the profile was timed in bf16; checkpoint always
    recomputes every layer, auto every layer where it would not fit otherwise."""
    def cost(replicas: Replicas, recompute: bool):
        p, layers, bf16 = replicas.p, replicas.layers, replicas.profile.training.bf16
        return (fsdp_step(layers, p, pricing.links, scale=pricing.calibration, bf16=bf16, recompute=recompute,
                          blocks=fsdp_blocks(layers, replicas.profile.granularity)),
                [fsdp_memory(layers, p, pricing.training.states, bf16, recompute=recompute)
                 + replicas.unmodelled] * p)
    return price_replicas(pricing, cost)  # every gather waits for the slowest

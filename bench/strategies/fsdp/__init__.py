"""FSDP2 (fully_shard), its home: the price here (no torch), the Trainer in trainer.py.
"""
from __future__ import annotations

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import replica_prediction, replicas_of
from pipebench.partition import costs
from pipebench.partition.profile import calibration

__all__ = ["price_fsdp"]

def price_fsdp(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """FSDP2: every device runs the whole model on batch / p samples, as DDP, with 1/p of the parameters,
    gradients and optimizer states, gathering each layer's parameters for its forward and backward
    (partition/costs.py fsdp_step, fsdp_memory). bf16 when the profile was timed in bf16; checkpoint
    always recomputes every layer, auto every layer where it would not fit otherwise."""
    replicas = replicas_of(strategy, profiles, devices)
    if isinstance(replicas, Prediction):
        return replicas
    p, layers, unmodelled = replicas.p, replicas.layers, replicas.unmodelled
    bf16 = replicas.profile.training.bf16

    def price(recompute: bool):
        return (costs.fsdp_step(layers, p, links, scale=calibration(list(profiles)), bf16=bf16, recompute=recompute,
                                blocks=costs.fsdp_blocks(layers, replicas.profile.granularity)),
                [costs.fsdp_memory(layers, p, training.states, bf16, recompute=recompute) + unmodelled] * p)
    return replica_prediction(strategy, price, profiles[0].batch, caps, speeds, training)  # every gather waits for the slowest

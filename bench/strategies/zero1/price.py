"""ZeRO-1's price (no torch): DDP's step plus the broadcast of the updated shards."""
from __future__ import annotations

from pipebench.bench.strategies.ddp.cost import ddp_memory, ddp_step
from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing, Replicas, price_replicas
from pipebench.partition.planning import link_costs
from pipebench.partition.planning.memory import recomputing

__all__ = ["price_zero1"]

def price_zero1(pricing: Pricing) -> Prediction:
    """ZeRO-1 (trainer.py): DDP's step (bench/strategies/ddp/cost.py ddp_step) plus the broadcast of the
    updated shards after it, which moves what an all-gather of the parameters does (link_costs.gather_ms); DDP's
    memory with the optimizer's states divided over the p replicas."""
    links = pricing.links

    def cost(replicas: Replicas, recompute: bool):  # recompute: every layer's forward runs again in the backward
        p, layers = replicas.p, replicas.layers
        params = sum(l.param_bytes for l in layers)
        states = -(-params * pricing.training.states // p)  # this replica's share of the optimizer's states
        priced = [recomputing(l) for l in layers] if recompute else layers
        return (ddp_step(priced, p, links, scale=pricing.calibration) + link_costs.gather_ms(params, p, links),
                [ddp_memory(layers, p, states, recompute=recompute) + replicas.unmodelled] * p)
    return price_replicas(pricing, cost)

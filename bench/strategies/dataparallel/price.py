"""nn.DataParallel's price (no torch): its cost model is cost.py's `dataparallel_step`."""
from __future__ import annotations

from pipebench.bench.strategies.dataparallel.cost import dataparallel_step
from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing, Replicas, one_cpu_process, price_replicas, replica_memory

__all__ = ["price_dataparallel"]

def price_dataparallel(pricing: Pricing) -> Prediction:
    """nn.DataParallel: one process copies the model to every device each step, scatters the batch and
    gathers the outputs (cost.py dataparallel_step); it cannot recompute (its replicas' threads). On CPU
    stand-ins it runs the module as it is, on the whole batch, in one process: the profile's whole step
    timed at the whole batch (the calibrated layers' sum where it was not timed)."""
    states = 2 + pricing.training.states
    if one_cpu_process(pricing.strategy, pricing.devices):
        replicas = pricing.replicas()
        if isinstance(replicas, Prediction):
            return replicas
        whole = replicas.by_count.get(1)
        if whole is None:
            return pricing.no_figure("no profile of the whole batch")
        # The module as it is, on the whole batch, in one process: the whole step the profile timed so.
        step = whole.whole_step_ms or pricing.calibration * sum(l.step_ms for l in whole.layers)
        return Prediction.of_step(pricing.strategy.name, step, pricing.batch,
                                  memory=[replica_memory(whole.layers, states)], fits=True)

    def cost(replicas: Replicas, recompute: bool):
        p, layers, unmodelled = replicas.p, replicas.layers, replicas.unmodelled
        return (dataparallel_step(layers, p, pricing.links, scale=pricing.calibration,
                                  output_bytes=layers[-1].output_bytes),
                [replica_memory(layers, states) + unmodelled] +
                [replica_memory(layers, 2) + unmodelled] * (p - 1))
    return price_replicas(pricing, cost)

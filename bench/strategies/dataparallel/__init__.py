"""nn.DataParallel, its home: the price here (no torch), the Trainer in trainer.py.
"""
from __future__ import annotations

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import one_cpu_process, replica_prediction, replicas_of
from pipebench.partition import costs
from pipebench.partition.profile import calibration

__all__ = ["price_dataparallel"]

def price_dataparallel(strategy, profiles, devices, caps, speeds, links, training,
                       micro_batches=None) -> Prediction:
    """nn.DataParallel: one process copies the model to every device each step, scatters the batch and
    gathers the outputs (partition/costs.py dataparallel_step); it cannot recompute (its replicas'
    threads). On CPU stand-ins it runs the module as it is, on the whole batch, in one process: the
    profile's whole step timed at the whole batch (the calibrated layers' sum where it was not timed)."""
    replicas = replicas_of(strategy, profiles, devices)
    if isinstance(replicas, Prediction):
        return replicas
    p, layers, unmodelled = replicas.p, replicas.layers, replicas.unmodelled
    states = 2 + training.states
    if one_cpu_process(strategy, devices):
        whole = replicas.by_count.get(1)
        if whole is None:
            return Prediction(strategy.name, None, None, [], False, 1, None, "no profile of the whole batch")
        # The module as it is, on the whole batch, in one process: the whole step the profile timed so.
        step = whole.whole_step_ms or calibration(list(profiles)) * sum(l.step_ms for l in whole.layers)
        return Prediction(strategy.name, step, profiles[0].batch / step * 1e3 if step > 0 else None,
                          [costs.replica_memory(whole.layers, states)], True, 1, None)

    def price(recompute: bool):
        return (costs.dataparallel_step(layers, p, links, scale=calibration(list(profiles)),
                                        output_bytes=layers[-1].output_bytes),
                [costs.replica_memory(layers, states) + unmodelled] +
                [costs.replica_memory(layers, 2) + unmodelled] * (p - 1))
    return replica_prediction(strategy, price, profiles[0].batch, caps, speeds, training)

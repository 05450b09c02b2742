"""nn.DataParallel's cost model (pure: no torch).

One process broadcasts the parameters from the first device to the others every step, runs the
replicas' forwards and backwards in threads on 1/p of the batch each, gathers the outputs on the first
device, and sums the gradients back onto it after the backward; the link model is
partition/planning/link_costs.py's.
"""
from __future__ import annotations

from typing import Sequence

from pipebench.partition.planning.link_costs import Links
from pipebench.partition.profiling.profile_record import LayerProfile

__all__ = ["dataparallel_step"]


def dataparallel_step(layers: Sequence[LayerProfile], devices: int, links: Links, *, scale: float = 1.0,
                      output_bytes: float = 0.0, input_bytes: float = 0.0) -> float:
    """One nn.DataParallel step: broadcast the parameters, scatter the inputs, run the replicas (at the
    replica's micro-batch, in parallel), gather the outputs, and reduce the gradients onto device 0.

    The copies go from (or to) the first device one destination after another."""
    compute = scale * sum(l.step_ms for l in layers)
    if devices < 2:
        return compute
    params = sum(l.param_bytes for l in layers)
    others = devices - 1
    moves = others * (links.copy_ms(params) * 2 + links.copy_ms(input_bytes) + links.copy_ms(output_bytes))
    return compute + moves

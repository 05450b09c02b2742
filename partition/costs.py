"""What the replica strategies cost: data parallelism priced from the same profile a pipeline plan uses.

No torch: `pipebench advise` predicts every strategy from a saved profile on a machine without GPUs. The
pipelines are priced by their Plan (partition/plan.py, the schedule simulator); this module prices the
strategies that copy the whole model to every device instead of cutting it:

- DDP (`ddp_step`): every device runs forward and backward on its 1/p of the batch; gradients are summed
  by a ring all-reduce in buckets (torch's default: 25 MiB, the first one 1 MiB), each bucket starting
  as soon as the backward has produced all its gradients, one bucket at a time on the link, overlapped
  with the rest of the backward. What is left of the all-reduce after the backward ends is exposed.
- nn.DataParallel (`dataparallel_step`): one process broadcasts the parameters from the first device to
  the others every step, runs the replicas' forwards and backwards in threads on 1/p of the batch each,
  gathers the outputs on the first device, and sums the gradients back onto it after the backward.

Times are in ms of one step; a "layer" is a profiled segment (LayerProfile) with its forward and backward
at the replica's micro-batch size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pipebench.partition.plan import transfer_ms
from pipebench.partition.profile import LayerProfile

__all__ = ["Links", "allreduce_ms", "ddp_step", "DDP_CONTENTION", "dataparallel_step", "replica_memory", "DDP_BUCKET_BYTES",
           "DDP_FIRST_BUCKET_BYTES"]

DDP_BUCKET_BYTES = 25 * 2**20
DDP_FIRST_BUCKET_BYTES = 1 * 2**20
"""torch.nn.parallel.DistributedDataParallel's bucket_cap_mb=25 and its smaller first bucket."""


@dataclass(frozen=True)
class Links:
    """What moving bytes between the devices costs, as measured when the model was profiled.

    copy_gbps: one device to the next (activations across a cut, DataParallel's broadcast).
    allreduce_gbps: bus bandwidth of an all-reduce over the devices (NCCL's definition: an all-reduce of
        S bytes over p devices takes 2 (p - 1) / p x S / allreduce_gbps).
    latency_ms: the fixed cost of one message or collective call."""

    copy_gbps: float = 0.0
    allreduce_gbps: float = 0.0
    latency_ms: float = 0.0

    def copy_ms(self, nbytes: float) -> float:
        return transfer_ms(nbytes, self.copy_gbps, self.latency_ms)


def allreduce_ms(nbytes: float, devices: int, links: Links) -> float:
    """A ring all-reduce of `nbytes` over `devices` (0 on one device or when the link is not priced)."""
    if devices < 2 or links.allreduce_gbps <= 0:
        return 0.0
    return 2 * (devices - 1) / devices * nbytes / (links.allreduce_gbps * 1e9) * 1e3 + links.latency_ms


DDP_CONTENTION = 1.0
"""How much of an all-reduce that overlaps the backward the backward pays anyway: NCCL's kernels take SMs
and memory bandwidth from it. On 2x H200, GPT 800M's DDP step (3.2 GB of gradients, 16 ms of all-reduce)
measured 409 ms against 384 ms predicted with the all-reduce hidden: the backward paid it all."""


def ddp_step(layers: Sequence[LayerProfile], devices: int, links: Links, *, scale: float = 1.0,
             contention: float = DDP_CONTENTION, bucket_bytes: int = DDP_BUCKET_BYTES,
             first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES) -> float:
    """One DDP step: forward, backward, and the gradient all-reduce as far as the backward cannot hide it.

    `layers` are profiled at the replica's micro-batch (batch / devices). Gradients become ready in
    reverse layer order; buckets fill in that order (a layer's gradients may span buckets), and each
    bucket's all-reduce starts when its last gradient is ready and the previous bucket is done; the
    backward still running slows by `contention` x the all-reduce time it overlaps. scale: the profile's
    calibration, on every compute time."""
    forward = scale * sum(l.forward_ms for l in layers)
    clock = forward
    comm_free = forward
    filled, cap = 0.0, float(first_bucket_bytes)
    for layer in reversed(layers):
        clock += scale * layer.backward_ms
        left = float(layer.param_bytes)
        while left > 0:
            take = min(left, cap - filled)
            filled += take
            left -= take
            if filled >= cap:  # the bucket is full: reduce it once this layer's gradients exist
                took = allreduce_ms(filled, devices, links)
                comm_free = max(comm_free, clock) + took
                clock += contention * took  # the backward goes on beside it, slowed
                filled, cap = 0.0, float(bucket_bytes)
    if filled > 0:
        comm_free = max(comm_free, clock) + allreduce_ms(filled, devices, links)
    return max(clock, comm_free)


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


def replica_memory(layers: Sequence[LayerProfile], states: int, *, extra_param_copies: int = 0) -> int:
    """Bytes one whole replica holds at its peak: parameters x (`states` copies: the parameter, its
    gradient and the optimizer's), plus `extra_param_copies` (DDP's gradient buckets), plus every layer's
    saved activations for its micro-batch."""
    params = sum(l.param_bytes for l in layers)
    return int(params * (states + extra_param_copies) + sum(l.saved_bytes for l in layers))

"""DistributedDataParallel's cost model (pure: no torch, for the registry and advise).

Every device runs forward and backward on its 1/p of the batch; gradients are summed by a ring all-reduce
in buckets (torch's default: 25 MiB, the first one 1 MiB), each bucket starting as soon as the backward
has produced all its gradients, one bucket at a time on the link, overlapped with the rest of the
backward. What is left of the all-reduce after the backward ends is exposed. ZeRO-1's price builds on
`ddp_step` and `ddp_memory`, FSDP's on `DDP_CONTENTION`, and the hybrid's Trainer buckets its gradients
as DDP does (`DDP_BUCKET_BYTES`); the link model is partition/planning/link_costs.py's.
"""
from __future__ import annotations

from typing import Sequence

from pipebench.bench.strategies.pricing import replica_memory
from pipebench.partition.planning.link_costs import Links, allreduce_ms, step_end
from pipebench.partition.profiling.profile_record import LayerProfile

__all__ = ["ddp_step", "ddp_memory", "DDP_CONTENTION", "DDP_BUCKET_BYTES", "DDP_FIRST_BUCKET_BYTES"]

DDP_BUCKET_BYTES = 25 * 2**20
DDP_FIRST_BUCKET_BYTES = 1 * 2**20
"""torch.nn.parallel.DistributedDataParallel's bucket_cap_mb=25 and its smaller first bucket."""

DDP_CONTENTION = 1.0
"""How much of an all-reduce that overlaps the backward the backward pays anyway (DDP's; FSDP's collectives'
too): NCCL's kernels take SMs and memory bandwidth from it. On 2x H200, GPT 800M's DDP step (3.2 GB of gradients, 16 ms of all-reduce)
measured 409 ms against 384 ms predicted with the all-reduce hidden: the backward paid it all."""


def ddp_memory(layers: Sequence[LayerProfile], devices: int, optimizer_bytes: int, *, recompute: bool = False) -> int:
    """Bytes one DDP replica holds: the parameters and their gradients (replica_memory), the gradient buckets
    beside them on more than one device, and `optimizer_bytes` of optimizer states (DDP: all of them;
    ZeRO-1: its shard)."""
    return replica_memory(layers, 2, extra_param_copies=1 if devices > 1 else 0, recompute=recompute) + optimizer_bytes


def ddp_step(layers: Sequence[LayerProfile], devices: int, links: Links, *, scale: float = 1.0,
             contention: float = DDP_CONTENTION, bucket_bytes: int = DDP_BUCKET_BYTES,
             first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES) -> float:
    """One DDP step: forward, backward, and the gradient all-reduce as far as the backward cannot hide it.

    `layers` are profiled at the replica's micro-batch (batch / devices). Gradients become ready in
    reverse layer order; buckets fill in that order (a layer's gradients may span buckets), and each
    bucket's all-reduce starts when its last gradient is ready and the previous bucket is done; the
    backward still running slows by `contention` x the all-reduce time it overlaps. scale: the profile's
    calibration, on every compute time; on CPU stand-ins, every replica computing at once is slowed by
    the cores' contention (links.contention) besides, DDP's own runtime costs links.ddp_ms a step and
    links.ddp_layer_ms a layer with parameters, and the step ends with the loss's all-reduce
    (`step_end`)."""
    scale *= links.contention
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
    runtime = links.ddp_ms + links.ddp_layer_ms * sum(1 for layer in layers if layer.param_bytes)
    return max(clock, comm_free) + runtime + step_end(devices, links)

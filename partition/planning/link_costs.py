"""What the replica strategies share: the link model and the collectives, priced from the same profile a
pipeline plan uses.

No torch: `pipebench advise` prices from a saved profile on a machine without GPUs. The pipelines are
priced by their Plan (partition/planning/plan.py, the schedule simulator); the strategies that copy the
whole model to every device are priced by their own packages' cost models (bench/strategies/ddp/cost.py,
fsdp/cost.py, dataparallel/cost.py), on what they share here: the `Links` the profile measured, a ring
all-reduce (`allreduce_ms`: DDP's buckets, the hybrid's stages), an all-gather or reduce-scatter
(`gather_ms`: FSDP's collectives, ZeRO-1's broadcast of its shards) and the collective that ends a
replica's step (`step_end`: DDP, FSDP).

Times are in ms of one step; a "layer" is a profiled segment (LayerProfile) with its forward and backward
at the replica's micro-batch size.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipebench.partition.planning.cuts import transfer_ms

__all__ = ["Links", "allreduce_ms", "gather_ms", "step_end"]


@dataclass(frozen=True)
class Links:
    """What moving bytes between the devices costs, and on CPU stand-ins what sharing the cores costs,
    as measured when the model was profiled.

    copy_gbps: one device to the next (activations across a cut, DataParallel's broadcast).
    allreduce_gbps: bus bandwidth of an all-reduce over the devices (NCCL's definition: an all-reduce of
        S bytes over p devices takes 2 (p - 1) / p x S / allreduce_gbps).
    latency_ms: the fixed cost of one message.
    collective_ms: the fixed cost of one collective call (None: latency_ms); on CPU stand-ins every
        replica strategy's step ends with one, the loss's all-reduce (bench/strategies/trainers.py
        ReplicaTrainer), which every process waits for.
    contention: CPU processes standing in for the devices share the cores: how much slower a step is
        while all of them compute (1.0: devices of their own, GPUs).
    fsdp_layer_ms: CPU stand-ins: FSDP2's own cost per sharded layer and step (0: not priced).
    ddp_ms, ddp_layer_ms: CPU stand-ins: DDP's own cost per step and per layer with parameters (its
        forward's preparation, its gradient hooks and bucket copies; 0: not priced).
    gather_gbps, scatter_gbps: bus bandwidths of an all-gather and of a reduce-scatter (an all-gather of
        S bytes over p devices takes (p - 1) / p x S / gather_gbps), which FSDP's collectives move; None:
        the all-reduce's (NCCL's rings run all three alike; gloo's all-gather and reduce-scatter reached
        0.5-0.7 and 0.3 GB/s where its all-reduce reached 1.1-1.3, 8-32 MB over two processes)."""

    copy_gbps: float = 0.0
    allreduce_gbps: float = 0.0
    latency_ms: float = 0.0
    contention: float = 1.0
    fsdp_layer_ms: float = 0.0
    collective_ms: float | None = None
    ddp_ms: float = 0.0
    ddp_layer_ms: float = 0.0
    gather_gbps: float | None = None
    scatter_gbps: float | None = None

    def copy_ms(self, nbytes: float) -> float:
        return transfer_ms(nbytes, self.copy_gbps, self.latency_ms)

    @property
    def collective(self) -> float:
        """One collective call's fixed cost."""
        return self.latency_ms if self.collective_ms is None else self.collective_ms


def allreduce_ms(nbytes: float, devices: int, links: Links) -> float:
    """A ring all-reduce of `nbytes` over `devices` (0 on one device or when the link is not priced)."""
    if devices < 2 or links.allreduce_gbps <= 0:
        return 0.0
    return 2 * (devices - 1) / devices * nbytes / (links.allreduce_gbps * 1e9) * 1e3 + links.collective


def step_end(devices: int, links: Links) -> float:
    """What a step of p processes pays after its last layer: the loss's all-reduce over them (the replica
    strategies) or its broadcast from the last stage (the pipelines), one collective that every process
    waits for. Priced only where collectives are (0 on one device or where links.collective_ms is not
    measured: on GPUs the loss's collective hides behind the queued kernels)."""
    return links.collective_ms if devices > 1 and links.collective_ms else 0.0


def gather_ms(nbytes: float, devices: int, links: Links, *, scatter: bool = False) -> float:
    """An all-gather (or with `scatter` a reduce-scatter) whose whole input or result is `nbytes`: half a
    ring all-reduce's traffic, (p - 1) / p x nbytes, at its own bus bandwidth where measured (links.gather_gbps,
    links.scatter_gbps), else the all-reduce's (0 on one device, for nothing, or unpriced)."""
    gbps = (links.scatter_gbps if scatter else links.gather_gbps) or links.allreduce_gbps
    if devices < 2 or nbytes <= 0 or gbps <= 0:
        return 0.0
    return (devices - 1) / devices * nbytes / (gbps * 1e9) * 1e3 + links.collective



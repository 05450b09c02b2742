"""FSDP2's cost model (pure: no torch).

Every device holds 1/p of the parameters, gradients and optimizer states, all-gathers each block's
parameters before its forward and again before its backward, and reduce-scatters its gradients
(partition/planning/link_costs.py `gather_ms`: half an all-reduce's traffic each), overlapped with the compute
as DDP's buckets are.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from pipebench.bench.strategies.ddp.cost import DDP_CONTENTION
from pipebench.partition.planning.link_costs import Links, gather_ms, step_end
from pipebench.partition.profiling.profile_record import LayerProfile, kept_bytes

__all__ = ["fsdp_blocks", "fsdp_step", "fsdp_memory"]


def fsdp_blocks(layers: Sequence[LayerProfile], granularity: int | None) -> list[bool]:
    """Per layer, whether FSDP2's runtime pays a block's cost there: the first layer with parameters of
    each block trainer.py shards (`blocks`), and of the root, which holds the rest. A zoo
    model's layers (granularity 1) are its blocks; finer layers are named by their module path, and a
    block is a child of a container (`transformer.h.0` of `transformer.h.0.attn.c_attn`, `layer1.0` of
    `layer1.0.conv1`): the path up to its first number; a layer outside every block is the root's."""
    seen: set[str] = set()
    starts = []
    for layer in layers:
        parts = layer.name.split(".")
        block = layer.name if (granularity or 1) <= 1 else next(
            (".".join(parts[:k + 1]) for k, part in enumerate(parts) if part.isdigit()), "")
        starts.append(bool(layer.param_bytes) and block not in seen)
        if layer.param_bytes:
            seen.add(block)
    return starts


def fsdp_step(layers: Sequence[LayerProfile], devices: int, links: Links, *, scale: float = 1.0,
              bf16: bool = False, recompute: bool = False, contention: float = DDP_CONTENTION,
              blocks: Sequence[bool] | None = None) -> float:
    """One FSDP2 step (fully_shard per block): each block's parameters are all-gathered, in one collective,
    before its forward and again before its backward, and its gradients reduce-scattered once its backward
    is done.

    The collectives run one after another on the link, in the order FSDP2 issues them: the next block's
    all-gather when this block's compute starts (one prefetched), a reduce-scatter when a backward ends.
    A block computes once its own gather is done. `layers` are profiled at the replica's micro-batch
    (batch / devices); scale: the profile's calibration, on every compute time. bf16: parameters are
    gathered in bf16 (half the bytes), gradients reduced in fp32. recompute: every layer's backward runs
    its forward again first (activation checkpointing). contention: as DDP's, the compute running beside a
    collective slows by this share of the collective's time (NCCL's kernels take SMs from it; gloo's
    copies take the CPU stand-ins' cores).

    `blocks` (per layer: fsdp_blocks; None: every layer with parameters begins one) says where a block
    begins; it runs to the next one, and layers before the first belong to the first. On CPU stand-ins every
    replica computes at once, slowed by the cores' contention (links.contention), and each block costs
    FSDP2's own runtime, links.fsdp_layer_ms a step (half before its forward, half before its backward),
    which its probe timed with its three collectives' calls and waits: their bytes are what the link then
    adds. Where that cost is not measured (GPUs), each collective pays the link's fixed cost instead."""
    if not layers:
        return 0.0
    scale *= links.contention
    starts = [bool(l.param_bytes) for l in layers] if blocks is None else list(blocks)
    shards = _sharded_blocks(layers, starts, scale, bf16, recompute, links.fsdp_layer_ms)
    fixed = 0.0 if links.fsdp_layer_ms else links.collective  # the runtime's measured cost holds the calls'
    link = _FsdpLink(devices, replace(links, collective_ms=fixed), contention)
    clock = _fsdp_pass(shards, link, 0.0, backward=False)
    clock = _fsdp_pass(shards, link, clock, backward=True)
    return max(clock, link.free) + step_end(devices, links)


@dataclass(frozen=True)
class _ShardedBlock:
    """One block as fsdp_step prices it: what its collectives move and what it computes."""

    gathered: float
    """Bytes of its parameters all-gathered before its forward and again before its backward."""
    reduced: float
    """Bytes of its gradients reduce-scattered after its backward."""
    runtime_ms: float
    """FSDP2's own cost of the block a step, half before each pass (0 where not measured)."""
    forward_ms: float
    backward_ms: float
    """Its backward, its forward again first where it recomputes."""


def _sharded_blocks(layers: Sequence[LayerProfile], starts: Sequence[bool], scale: float, bf16: bool,
                    recompute: bool, runtime_ms: float) -> list[_ShardedBlock]:
    """The blocks that `starts` begin (layers before the first belong to the first), each with its bytes
    (gathered in bf16 at half of them), its runtime cost where it begins one of FSDP2's units, and its
    compute at `scale`."""
    units: list[list[int]] = []
    for i, begins in enumerate(starts):
        if begins or not units:
            units.append([])
        units[-1].append(i)
    reduced = [sum(layers[i].param_bytes for i in unit) for unit in units]
    return [_ShardedBlock(
        gathered=b / 2 if bf16 else b,
        reduced=b,
        runtime_ms=runtime_ms if starts[unit[0]] else 0.0,
        forward_ms=scale * sum(layers[i].forward_ms for i in unit),
        backward_ms=scale * sum(layers[i].backward_ms + (layers[i].forward_ms if recompute else 0.0) for i in unit),
    ) for unit, b in zip(units, reduced)]


@dataclass
class _FsdpLink:
    """The link FSDP2's collectives queue on, one after another, and what they slow the compute by."""

    devices: int
    links: Links
    contention: float
    free: float = 0.0
    """When the link is done with everything queued."""
    slowed: float = 0.0
    """What the collectives queued since the compute last started cost it (`contention` of their time)."""

    def queue(self, nbytes: float, at: float, scatter: bool = False) -> float:
        """Queue a collective issued at `at`; when it is done."""
        took = gather_ms(nbytes, self.devices, self.links, scatter=scatter)
        self.free = max(self.free, at) + took
        self.slowed += self.contention * took
        return self.free

    def take_slowed(self) -> float:
        """What the compute about to start pays for the collectives it overlapped; counted once."""
        slowed, self.slowed = self.slowed, 0.0
        return slowed


def _fsdp_pass(blocks: list[_ShardedBlock], link: _FsdpLink, clock: float, *, backward: bool) -> float:
    """One pass over the blocks from `clock`, forward in order or backward in reverse; when its compute
    ends. A block computes once its gather is done; the next block's gather is issued as it starts (one
    prefetched), and in the backward its gradients are reduce-scattered once they exist."""
    order = blocks[::-1] if backward else blocks
    ready = link.queue(order[0].gathered, clock)
    link.take_slowed()  # that first gather waits, overlapping nothing
    for k, block in enumerate(order):
        start = max(clock, ready) + link.take_slowed() + block.runtime_ms / 2
        if k + 1 < len(order):
            ready = link.queue(order[k + 1].gathered, start)
        clock = start + (block.backward_ms if backward else block.forward_ms)
        if backward:
            link.queue(block.reduced, clock, scatter=True)
    return clock


def fsdp_memory(layers: Sequence[LayerProfile], devices: int, states: int, bf16: bool = False, *,
                recompute: bool = False) -> int:
    """Bytes one FSDP process holds at its peak: its 1/p of the parameters, their gradients and `states`
    optimizer states each; the two largest layers gathered whole at once (the one computing and the one
    prefetched; half the bytes in bf16); and every layer's saved activations at the replica's micro-batch,
    or, recomputing, every layer's input and the largest layer's activations (as bench/strategies/pricing.py replica_memory)."""
    params = sum(l.param_bytes for l in layers)
    largest = sorted((l.param_bytes for l in layers), reverse=True)[:2]
    gathered = sum(largest) / (2 if bf16 else 1)
    if recompute:
        kept = sum(l.output_bytes for l in layers[:-1]) + max(l.saved_bytes for l in layers)
    else:
        kept = kept_bytes(layers)
    return int(params * (2 + states) / devices + gathered + kept)

"""What the replica strategies cost: data parallelism priced from the same profile a pipeline plan uses.

No torch: `pipebench advise` prices these from a saved profile on a machine without GPUs. The
pipelines are priced by their Plan (partition/planning/plan.py, the schedule simulator); this module prices the
strategies that copy the whole model to every device instead of cutting it:

- DDP (`ddp_step`): every device runs forward and backward on its 1/p of the batch; gradients are summed
  by a ring all-reduce in buckets (torch's default: 25 MiB, the first one 1 MiB), each bucket starting
  as soon as the backward has produced all its gradients, one bucket at a time on the link, overlapped
  with the rest of the backward. What is left of the all-reduce after the backward ends is exposed.
- nn.DataParallel (`dataparallel_step`): one process broadcasts the parameters from the first device to
  the others every step, runs the replicas' forwards and backwards in threads on 1/p of the batch each,
  gathers the outputs on the first device, and sums the gradients back onto it after the backward.
- FSDP2 (`fsdp_step`, `fsdp_memory`): every device holds 1/p of the parameters, gradients and optimizer
  states, all-gathers each layer's parameters before its forward and again before its backward, and
  reduce-scatters its gradients (`gather_ms`: half an all-reduce's traffic each), overlapped with the
  compute as DDP's buckets are.

Times are in ms of one step; a "layer" is a profiled segment (LayerProfile) with its forward and backward
at the replica's micro-batch size.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from pipebench.partition.planning.cuts import transfer_ms
from pipebench.partition.profiling.profile_record import LayerProfile, kept_bytes

__all__ = ["Links", "allreduce_ms", "step_end", "ddp_step", "DDP_CONTENTION", "dataparallel_step", "replica_memory", "DDP_BUCKET_BYTES",
           "DDP_FIRST_BUCKET_BYTES", "gather_ms", "fsdp_blocks", "fsdp_step", "fsdp_memory"]

DDP_BUCKET_BYTES = 25 * 2**20
DDP_FIRST_BUCKET_BYTES = 1 * 2**20
"""torch.nn.parallel.DistributedDataParallel's bucket_cap_mb=25 and its smaller first bucket."""


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


def step_end(devices: int, links: Links) -> float:
    """What a step of p processes pays after its last layer: the loss's all-reduce over them (the replica
    strategies) or its broadcast from the last stage (the pipelines), one collective that every process
    waits for. Priced only where collectives are (0 on one device or where links.collective_ms is not
    measured: on GPUs the loss's collective hides behind the queued kernels)."""
    return links.collective_ms if devices > 1 and links.collective_ms else 0.0


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


def replica_memory(layers: Sequence[LayerProfile], states: int, *, extra_param_copies: int = 0,
                   recompute: bool = False) -> int:
    """Bytes one whole replica holds at its peak: parameters x (`states` copies: the parameter, its
    gradient and the optimizer's), plus `extra_param_copies` (DDP's gradient buckets), plus autocast's
    bf16 weight copies, plus every layer's saved activations for its micro-batch; recomputing layer by
    layer (activation checkpointing), every layer's input and the largest layer's activations instead."""
    params = sum(l.param_bytes for l in layers)
    fixed = params * (states + extra_param_copies) + sum(l.cast_bytes for l in layers)
    if recompute:
        return int(fixed + sum(l.output_bytes for l in layers[:-1]) + max(l.saved_bytes for l in layers))
    return int(fixed + kept_bytes(layers))


# ------------------------------------------------------------------------------------------------ FSDP

def gather_ms(nbytes: float, devices: int, links: Links, *, scatter: bool = False) -> float:
    """An all-gather (or with `scatter` a reduce-scatter) whose whole input or result is `nbytes`: half a
    ring all-reduce's traffic, (p - 1) / p x nbytes, at its own bus bandwidth where measured (links.gather_gbps,
    links.scatter_gbps), else the all-reduce's (0 on one device, for nothing, or unpriced)."""
    gbps = (links.scatter_gbps if scatter else links.gather_gbps) or links.allreduce_gbps
    if devices < 2 or nbytes <= 0 or gbps <= 0:
        return 0.0
    return (devices - 1) / devices * nbytes / (gbps * 1e9) * 1e3 + links.collective


def fsdp_blocks(layers: Sequence[LayerProfile], granularity: int | None) -> list[bool]:
    """Per layer, whether FSDP2's runtime pays a block's cost there: the first layer with parameters of
    each block bench/strategies/fsdp/trainer.py shards (`blocks`), and of the root, which holds the rest. A zoo
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
    or, recomputing, every layer's input and the largest layer's activations (as replica_memory)."""
    params = sum(l.param_bytes for l in layers)
    largest = sorted((l.param_bytes for l in layers), reverse=True)[:2]
    gathered = sum(largest) / (2 if bf16 else 1)
    if recompute:
        kept = sum(l.output_bytes for l in layers[:-1]) + max(l.saved_bytes for l in layers)
    else:
        kept = kept_bytes(layers)
    return int(params * (2 + states) / devices + gathered + kept)

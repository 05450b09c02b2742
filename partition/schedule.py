"""Pure simulator of pipeline schedules: from per-stage times to a timeline, a step time and a bubble.

No torch: the planner calls it for every candidate micro-batch count, and the report draws its
timeline beside the measured one.

Stages are placed on devices (`placement`) and each device runs its operations in a fixed order
(`device_orders`), one at a time. A forward F(s, i) of micro-batch i waits for F(s-1, i) plus the
transfer across the cut; a backward B(s, i) waits for B(s+1, i) plus the transfer back (the last
stage's backward waits for its own forward). Transfers delay the receiver but do not occupy either
device (they run on their own streams or NCCL channels). A cut between two stages on the same device
costs nothing: torch.distributed.pipelining hands the tensor over locally instead of sending it. CPU
processes standing in for devices are different (SharedCores): they share the cores, and a send is its
sender's work.

GPipe, 2 stages, 4 micro-batches (F = forward, B = backward, time runs right):

    stage 0: F0 F1 F2 F3 .. .. .. .. .. B0 B1 B2 B3
    stage 1: .. F0 F1 F2 F3 B0 B1 B2 B3 ..

1F1B, same: stage s runs min(p - s - 1, m) warm-up forwards, then alternates, so it holds at most
p - s micro-batches' activations instead of m:

    stage 0: F0 F1 .. B0 F2 B1 F3 B2 .. B3
    stage 1: .. F0 B0 F1 B1 F2 B2 F3 B3

The other schedules put several stages on each device, as torch.distributed.pipelining's
ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble and ScheduleZBVZeroBubble do. Below, with p = 2
devices, 4 stages, m = 4 micro-batches and every operation taking one slot, an upper-case letter is an
operation of the device's first stage and a lower-case one of its second.

Interleaved 1F1B (Narayanan et al., 2021): stage s on device s % p, so each micro-batch passes every
device v times, and the fill and drain, made of stages 1/v as long, shrink to 1/v of 1F1B's. With
equal stages, no transfers and m a multiple of p, step = (v m + p - 1) (f + b):

    device 0: F0 F1 f0 f1 F2 b0 F3 b1 f2 B0 f3 B1 .. b2 .. b3 B2 B3
    device 1: .. F0 F1 f0 b0 f1 b1 F2 B0 F3 B1 f2 b2 f3 b3 B2 B3

Zero-bubble schedules (Qi et al., 2024) split each backward into I, the gradient for the input, which
the previous stage waits for, and W, the gradient for the weights, which nothing waits for and which
fills the gaps. Interleaved zero bubble (ZB1P), same placement; with equal stages, no transfers, m a
multiple of p and W no longer than I, step = v m (f + b) + (p - 1) (f + I - W):

    device 0: F0 F1 f0 f1 .. i0 w0 F2 i1 w1 F3 I0 W0 f2 I1 W1 f3 i2 w2 i3 w3 I2 W2 I3 W3
    device 1: .. F0 F1 f0 i0 f1 i1 w0 F2 I0 w1 F3 I1 W0 f2 i2 W1 f3 i3 w2 I2 w3 I3 W2 W3

ZB-V: two stages per device in a V, stage s on device s for s < p, else on 2p - 1 - s, so device 0
holds the first and the last stage, and device p - 1 both stages at the turn, whose cut costs nothing.
With equal stages, no transfers, f = I = W and m >= 2p, only the ramp-up idles: step = 2m (f + b) + (p - 1) f:

    device 0: F0 F1 F2 f0 i0 w0 f1 i1 w1 F3 I0 W0 f2 i2 w2 I1 W1 f3 i3 w3 I2 W2 I3 W3
    device 1: .. F0 f0 F1 f1 i0 w0 F2 I0 W0 f2 i1 w1 F3 I1 W1 f3 i2 w2 I2 i3 I3 W2 w3 W3

The profile measures a whole backward only, so how it splits into I and W is an assumption:
`weight_fraction` of it is W (default one half, the paper's B = W).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence
from pipebench.errors import UserError

__all__ = [
    "Schedule", "SCHEDULES", "DEFAULT_SCHEDULE", "IN_TURN", "get_schedule", "takes_micro_batches", "Op", "Timeline", "placement", "device_orders", "op_order", "simulate", "ideal_efficiency", "SharedCores",
]



@dataclass(frozen=True)
class Schedule:
    """What a pipeline schedule is, so that callers ask it instead of testing its name."""

    name: str
    torch_class: str
    """The torch.distributed.pipelining class that runs it."""
    layout: str = "one"
    """How stages sit on devices: "one" per device, "loop" (stage s on device s % p) or "v" (down and back
    up, two per device)."""
    stages_per_device: int = 1
    """Stages per device by default (the only count for "one" and "v")."""
    forwards_first: bool = False
    """GPipe: every forward, then every backward (else 1F1B's alternation after a warm-up)."""
    split_backward: bool = False
    """Zero bubble: the backward runs as I and W, so it cannot recompute activations."""
    micro_batch_per_stage: bool = False
    """torch's class needs at least as many micro-batches as stages (Schedule1F1B)."""

    @property
    def fixed_stages_per_device(self) -> bool:
        return self.layout != "loop"


SCHEDULES: dict[str, Schedule] = {s.name: s for s in [
    Schedule("gpipe", "ScheduleGPipe", forwards_first=True),
    Schedule("1f1b", "Schedule1F1B", micro_batch_per_stage=True),
    Schedule("interleaved", "ScheduleInterleaved1F1B", layout="loop", stages_per_device=2),
    Schedule("zb-interleaved", "ScheduleInterleavedZeroBubble", layout="loop", stages_per_device=2,
             split_backward=True),
    Schedule("zbv", "ScheduleZBVZeroBubble", layout="v", stages_per_device=2, split_backward=True),
]}

DEFAULT_SCHEDULE = "1f1b"
"""What `pipebench plan` and pipebench.plan() plan for when no schedule is named."""
IN_TURN = "gpipe"
"""The schedule of stages that run in turn on one batch: hand plans, device maps, the single baseline."""


def get_schedule(name: str) -> Schedule:
    """The schedule of that name; UserError naming the choices otherwise (the one home of that refusal)."""
    try:
        return SCHEDULES[name]
    except (KeyError, TypeError):
        raise UserError(f"unknown schedule {name!r}; choose one of: {', '.join(SCHEDULES)}") from None


def takes_micro_batches(schedule: str, devices: int, micro_batches: int) -> bool:
    """Whether torch's class of `schedule` runs `micro_batches` on `devices`: the looped ones
    (ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble) take them in max(1, m // p) equal rounds."""
    if get_schedule(schedule).layout != "loop":
        return True
    return micro_batches % max(1, micro_batches // devices) == 0


@dataclass(frozen=True)
class Op:
    """One operation of one micro-batch on one stage: forward "F", backward "B", or, in zero-bubble
    schedules, the backward's input part "I" and weight part "W"."""

    stage: int
    kind: str
    micro: int
    start: float
    end: float
    device: int | None = None
    """The device it ran on; simulate always sets it (None only for an Op built by hand)."""


@dataclass(frozen=True)
class Timeline:
    """A simulated training step."""

    ops: list[Op]
    step_time: float
    """From the first forward to the last backward."""
    bubble_fraction: float
    """Share of device-time spent idle: 1 - busy / (devices x step_time)."""
    peak_in_flight: list[int]
    """Per stage, the most micro-batches whose activations are held at once: from the forward until the
    backward (B, or W in zero-bubble schedules, since the weight gradient still needs them)."""


def placement(schedule: str, stages: int, devices: int | None = None) -> list[int]:
    """The device of each stage, as torch.distributed.pipelining places them (devices defaults to stages).

    gpipe and 1f1b: one stage per device. interleaved and zb-interleaved: in loops, stage s on device
    s % devices. zbv: in a V, down the devices and back up, two stages each."""
    layout = get_schedule(schedule).layout
    p = stages if devices is None else devices
    if stages < 1 or p < 1:
        raise UserError(f"need at least one stage and one device (got {stages}, {p})")
    if layout == "one":
        if stages != p:
            raise UserError(f"{schedule} runs one stage per device; got {stages} stages on {p} devices")
        return list(range(p))
    if layout == "v":
        if stages != 2 * p:
            raise UserError(f"{schedule} runs two stages per device (stages = 2 x devices); "
                             f"got {stages} stages on {p} devices")
        return [s if s < p else 2 * p - 1 - s for s in range(stages)]
    if stages % p:
        raise UserError(f"{schedule} puts stage s on device s % devices, so stages must be a multiple of devices; "
                         f"got {stages} stages on {p} devices")
    return [s % p for s in range(stages)]


def device_orders(
    schedule: str, stages: int, micro_batches: int, devices: int | None = None,
) -> list[list[tuple[str, int, int]]]:
    """For each device, the (kind, stage, micro-batch) operations in the order it runs them; kinds as in Op.

    The multi-stage orders follow torch.distributed.pipelining (ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble) so that the prediction is of what torch runs."""
    kind = get_schedule(schedule)
    if stages < 1 or micro_batches < 1:
        raise UserError(f"need at least one stage and one micro-batch (got {stages}, {micro_batches})")
    where = placement(schedule, stages, devices)
    p, m = max(where) + 1, micro_batches
    if kind.layout == "one":
        return [[(op, s, i) for op, i in _single_stage_order(kind, s, p, m)] for s in range(p)]
    if kind.layout == "v":
        return [_zbv_order(d, p, m) for d in range(p)]
    rounds = max(1, m // p)
    if not takes_micro_batches(schedule, p, m):
        raise UserError(f"{schedule} runs micro-batches in max(1, micro_batches // devices) = {rounds} equal rounds, "
                         f"so micro_batches must be a multiple of {rounds} (got {m})")
    return [_interleaved_order(d, p, stages // p, m, kind.split_backward) for d in range(p)]


def op_order(
    schedule: str, stages: int, micro_batches: int, devices: int | None = None,
) -> list[list[tuple[str, int]]]:
    """For each stage, the (kind, micro-batch) operations in the order it runs them: device_orders seen
    from one stage."""
    return _per_stage(device_orders(schedule, stages, micro_batches, devices), stages)


def simulate(
    forward: Sequence[float],
    backward: Sequence[float],
    micro_batches: int,
    schedule: str = DEFAULT_SCHEDULE,
    transfer: Sequence[float] | None = None,
    *,
    devices: int | None = None,
    weight_fraction: float = 0.5,
    backward_input: Sequence[float] | None = None,
    backward_weight: Sequence[float] | None = None,
    launch: dict[str, Sequence[float]] | None = None,
    shared_cores: SharedCores | None = None,
) -> Timeline:
    """Simulate one step.

    forward[s], backward[s]: time of one micro-batch's forward / backward on stage s.
    transfer[s]: time to move one micro-batch's activation (or its gradient) across the cut after stage s
    (len(forward) - 1 values; zero when omitted; ignored, as free, where both stages share a device).
    devices: how many devices the stages are placed on (see placement); defaults to one per stage.
    backward_input[s], backward_weight[s]: in zero-bubble schedules, the measured I (input gradient) and W
    (weight gradient) of stage s (the profiler measures them; together they exceed `backward`).
    weight_fraction: without those, the share of each backward taken to be W (the rest is I): an
    assumption, since W is roughly the weight-gradient matmuls, about half of a transformer block's backward.
    launch: on GPUs, the CPU's time to launch each kind ("F", "B", "I", "W") of operation of each stage.
    Each device then has two clocks: its CPU launches the operations one after another, running ahead of
    the GPU and of the data (a receive makes the GPU wait, not the CPU), and an operation's kernels can
    neither start before its launch starts nor end before its launch ends. With short kernels the CPU is
    the bottleneck; with long ones it hides entirely behind the GPU.
    shared_cores: the devices are CPU processes sharing one machine's cores (see SharedCores); None: each
    device computes on its own.
    """
    p = len(forward)
    if len(backward) != p:
        raise ValueError(f"need one backward time per stage ({len(backward)} != {p})")
    transfer = [0.0] * (p - 1) if transfer is None else list(transfer)
    if len(transfer) != p - 1:
        raise ValueError(f"need one transfer time per cut ({len(transfer)} != {p - 1})")
    if not 0 <= weight_fraction <= 1:
        raise ValueError(f"weight_fraction is a share of the backward, between 0 and 1 (got {weight_fraction})")
    if (backward_input is None) != (backward_weight is None):
        raise ValueError("give both backward_input and backward_weight, or neither")
    if backward_input is None:
        backward_input = [(1 - weight_fraction) * b for b in backward]
        backward_weight = [weight_fraction * b for b in backward]
    if len(backward_input) != p or len(backward_weight) != p:
        raise ValueError(f"need one input and one weight gradient time per stage ({p})")
    orders = device_orders(schedule, p, micro_batches, devices)
    where = placement(schedule, p, devices)
    hop = [t if where[s] != where[s + 1] else 0.0 for s, t in enumerate(transfer)]
    duration = {
        "F": list(forward),
        "B": list(backward),
        "I": list(backward_input),
        "W": list(backward_weight),
    }
    if shared_cores is not None:
        if launch:
            raise ValueError("launch times are a GPU's; shared cores are CPU processes'")
        ops = shared_cores.run(orders, duration, hop)
        return _timeline(ops, len(orders), p, orders, shared_cores.step_end_ms)

    cpu = {kind: list(launch[kind]) if launch and kind in launch else [0.0] * p for kind in "FBIW"}
    if launch and "I" not in launch:  # the launch of a split backward: as the duration splits
        cpu["I"] = [c * (1 - weight_fraction) for c in cpu["B"]]
        cpu["W"] = [c * weight_fraction for c in cpu["B"]]
    done: dict[tuple[str, int, int], float] = {}  # (kind, stage, micro) -> end time
    position = [0] * len(orders)
    free_at = [0.0] * len(orders)
    launched_at = [0.0] * len(orders)  # when each device's CPU has launched everything so far
    ops: list[Op] = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for d, order in enumerate(orders):
            while position[d] < len(order):
                kind, s, i = order[position[d]]
                ready = _ready_time(kind, s, i, p, done, hop)
                if ready is None:
                    break
                launch_start = launched_at[d]
                launched_at[d] += cpu[kind][s]
                start = max(ready, free_at[d], launch_start)
                end = max(start + duration[kind][s], launched_at[d])
                done[(kind, s, i)] = end
                free_at[d] = end
                ops.append(Op(s, kind, i, start, end, d))
                position[d] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - device_orders never produces a cycle
            raise RuntimeError(f"schedule {schedule!r} deadlocks")

    return _timeline(ops, len(orders), p, orders)


def _timeline(ops: list[Op], devices: int, stages: int, orders, step_end: float = 0.0) -> Timeline:
    step = max((op.end for op in ops), default=0.0) + step_end
    busy = sum(op.end - op.start for op in ops)  # with measured I and W, more than F + B
    bubble = 1.0 - busy / (devices * step) if step > 0 else 0.0
    return Timeline(
        ops=sorted(ops, key=lambda op: (op.start, op.device, op.stage)),
        step_time=step,
        bubble_fraction=bubble,
        peak_in_flight=[_peak_in_flight(order) for order in _per_stage(orders, stages)],
    )


@dataclass(frozen=True)
class SharedCores:
    """CPU processes standing in for devices on one machine's cores, as the pipelines run them there.

    A GPU computes on its own and sends over its own link; CPU stand-ins share the cores, the memory
    bandwidth and the network stack, so:
    - while k of the p devices compute at once, each runs 1 + (contention - 1) (k - 1) / (p - 1) times
      slower than alone (processor sharing; `contention` is the slowdown with all p busy, measured by
      hardware/probes.py for this machine at its load);
    - a send is the sender's own CPU work (gloo copies the bytes on the same cores): it lengthens the
      operation that sends, and the receiver waits for it, instead of running beside the compute;
    - every operation pays `action_ms`, the pipeline runtime's own cost of running it (its Python
      schedule, posting and waiting for its messages);
    - the step ends `step_end_ms` after the last operation: the loss's broadcast from the last stage
      (bench/strategies/pp.py), one collective that every process waits for.
    With contention 1 and no costs, the timeline is the plain simulator's with each transfer moved onto
    its sender."""

    contention: float = 1.0
    action_ms: float = 0.0
    step_end_ms: float = 0.0

    def __post_init__(self):
        if not self.contention >= 1.0 or not self.action_ms >= 0.0 or not self.step_end_ms >= 0.0:
            raise ValueError(f"contention is a slowdown of at least 1, action_ms and step_end_ms costs of at "
                             f"least 0 (got {self.contention}, {self.action_ms}, {self.step_end_ms})")

    def rate(self, busy: int, devices: int) -> float:
        """The speed of each of `busy` devices computing at once, of `devices`, against one alone."""
        return 1.0 / (1.0 + (self.contention - 1.0) * (busy - 1) / max(1, devices - 1))

    def run(self, orders, duration: dict[str, list[float]], hop: list[float]) -> list[Op]:
        """Play the devices' orders with time advancing from event to event: an operation starts once its
        input has arrived and its device is free, and all running ones progress at the shared rate."""
        stages = len(duration["F"])

        def work(kind: str, s: int) -> float:
            sends = (hop[s] if s < stages - 1 else 0.0) if kind == "F" else (
                hop[s - 1] if kind in "BI" and s > 0 else 0.0)
            return duration[kind][s] + sends + self.action_ms

        no_hop = [0.0] * len(hop)  # a send is the sender's work: the receiver waits for the op that sends
        position = [0] * len(orders)
        free_at = [0.0] * len(orders)
        running: dict[int, list] = {}  # device -> [kind, stage, micro, start, work left]
        done: dict[tuple[str, int, int], float] = {}
        ops: list[Op] = []
        now = 0.0
        while True:
            waiting = []  # when idle devices' next operations can start
            for d, order in enumerate(orders):
                if d in running or position[d] == len(order):
                    continue
                kind, s, i = order[position[d]]
                ready = _ready_time(kind, s, i, stages, done, no_hop)
                if ready is None:
                    continue
                start = max(ready, free_at[d])
                if start <= now:
                    running[d] = [kind, s, i, now, work(kind, s)]
                else:
                    waiting.append(start)
            if not running:
                if not waiting:
                    break
                now = min(waiting)
                continue
            rate = self.rate(len(running), len(orders))
            step = min([left / rate for *_, left in running.values()] + [t - now for t in waiting])
            now += step
            for d in list(running):
                entry = running[d]
                entry[4] -= step * rate
                if entry[4] <= 1e-12 * max(1.0, now):
                    kind, s, i, start, _ = entry
                    done[(kind, s, i)] = free_at[d] = now
                    ops.append(Op(s, kind, i, start, now, d))
                    position[d] += 1
                    del running[d]
        if len(ops) != sum(len(o) for o in orders):  # pragma: no cover - device_orders never produces a cycle
            raise RuntimeError("schedule deadlocks")
        return ops


def ideal_efficiency(stages: int, micro_batches: int) -> float:
    """m / (m + p - 1): the share of p devices' time that GPipe with equal stages keeps busy
    (Huang et al., GPipe, 2019, section 2.2)."""
    return micro_batches / (micro_batches + stages - 1)


def _single_stage_order(schedule: Schedule, s: int, p: int, m: int) -> list[tuple[str, int]]:
    if schedule.forwards_first:
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(p - s - 1, m)
    order = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        order += [("F", warmup + i), ("B", i)]
    return order + [("B", i) for i in range(m - warmup, m)]


def _interleaved_order(device: int, p: int, v: int, m: int, zero_bubble: bool) -> list[tuple[str, int, int]]:
    """Device `device`'s order in torch's ScheduleInterleaved1F1B, or ScheduleInterleavedZeroBubble (ZB1P).

    Its v stages are device, device + p, ...; it takes micro-batches in rounds of m // max(1, m // p):
    forwards run one round on each stage going up, backwards one round on each stage going down. After
    warm-up forwards it alternates one forward and one backward, then drains the backwards. The warm-up
    covers the rounds of the stages above the first, plus 2 forwards (1 for zero bubble) per device
    between this one and the last. Zero bubble runs I for B, and device d holds each W back d backwards
    (the W of backward k right after the I of backward k + d), so W fills the drain."""
    per_round = m // max(1, m // p)
    total = v * m  # forwards on this device, and backwards
    warmup = min((v - 1) * per_round + (1 if zero_bubble else 2) * (p - 1 - device), total)
    forwards = _numbered(device + p * (k // per_round % v) for k in range(total))
    backwards = _numbered(device + p * (v - 1 - k // per_round % v) for k in range(total))

    order = [("F", s, i) for s, i in forwards[:warmup]]
    for k, (s, i) in enumerate(backwards):
        if warmup + k < total:
            order.append(("F", *forwards[warmup + k]))
        if not zero_bubble:
            order.append(("B", s, i))
            continue
        order.append(("I", s, i))
        if k >= device:
            order.append(("W", *backwards[k - device]))
    if zero_bubble:
        order += [("W", s, i) for s, i in backwards[max(0, total - device):]]
    return order


def _zbv_order(device: int, p: int, m: int) -> list[tuple[str, int, int]]:
    """Device `device`'s order in torch's ScheduleZBVZeroBubble (Qi et al., 2024, section 6).

    The device holds stage `down` = device on the way down the V and `up` = 2p - 1 - device on the way
    back. torch plans at least 2p - 1 micro-batches, enough to fill the V, then drops the ones beyond m."""
    down, up = device, 2 * p - 1 - device
    n = max(m, 2 * p - 1)
    r = device
    steps = (
        [("F", down)] * (2 * (p - r) - 1)  # warm-up: fill the way down...
        + [("F", up), ("F", down)] * r  # ...and, as forwards come back up, the way up
        + [("F", up), ("I", up), ("W", up)] * (p - r)  # the first backwards start at the turn
        + [("F", down), ("I", down), ("W", down), ("F", up), ("I", up), ("W", up)] * (n - (2 * p - 1 - r))
        + [("I", down), ("W", down), ("F", up), ("I", up), ("W", up)] * (p - 1 - r)  # no forwards down left
        + [("I", down), ("I", up)] * r  # cool-down: inputs' gradients first, they are on the critical path
        + [("I", down), ("W", down)] * (p - r)
        + [("W", up)] * r + [("W", down)] * r  # the deferred weights' gradients
    )
    return [(kind, s, i) for (kind, s), i in _numbered(steps) if i < m]


def _numbered(items: Iterable[Hashable]) -> list:
    """Pair each item with how many times it came before: the micro-batch of each (kind, stage) in turn."""
    seen: Counter = Counter()
    numbered = []
    for item in items:
        numbered.append((item, seen[item]))
        seen[item] += 1
    return numbered


def _per_stage(orders: list[list[tuple[str, int, int]]], stages: int) -> list[list[tuple[str, int]]]:
    per_stage: list[list[tuple[str, int]]] = [[] for _ in range(stages)]
    for order in orders:
        for kind, s, i in order:
            per_stage[s].append((kind, i))
    return per_stage


def _ready_time(kind, s, i, p, done, hop) -> float | None:
    if kind == "F":
        if s == 0:
            return 0.0
        prev = done.get(("F", s - 1, i))
        return None if prev is None else prev + hop[s - 1]
    if kind == "W":
        return done.get(("I", s, i))
    if s == p - 1:  # B or I of the last stage: after its own forward
        return done.get(("F", s, i))
    nxt = done.get((kind, s + 1, i))  # B after the next stage's B, I after its I
    return None if nxt is None else nxt + hop[s]


def _peak_in_flight(order: list[tuple[str, int]]) -> int:
    held = peak = 0
    for kind, _ in order:
        held += {"F": 1, "B": -1, "W": -1}.get(kind, 0)
        peak = max(peak, held)
    return peak

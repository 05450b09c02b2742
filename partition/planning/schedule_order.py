"""Pipeline schedules, pure: where each one's stages sit on the devices, and the order in which each device
runs its operations (partition/planning/simulator.py plays these orders out in time); what each schedule
is (its `Schedule` record) is pipebench/base/schedules.py's.

No torch: the planner and the simulator read it for every candidate.

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

How the backward splits into I and W, where the profile measured only the whole, is the simulator's
assumption (simulator.simulate's `weight_fraction`).
"""
from __future__ import annotations

from collections import Counter
from typing import Hashable, Iterable

from pipebench.base.errors import UserError
from pipebench.base.schedules import Schedule, get_schedule, takes_micro_batches

__all__ = ["placement", "device_orders", "op_order", "per_stage", "ideal_efficiency"]


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
    """For each device, the (kind, stage, micro-batch) operations in the order it runs them; kinds as in simulator.Op.

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
    return per_stage(device_orders(schedule, stages, micro_batches, devices), stages)



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


def per_stage(orders: list[list[tuple[str, int, int]]], stages: int) -> list[list[tuple[str, int]]]:
    """The devices' orders seen from each stage: its (kind, micro-batch) operations in turn."""
    per_stage: list[list[tuple[str, int]]] = [[] for _ in range(stages)]
    for order in orders:
        for kind, s, i in order:
            per_stage[s].append((kind, i))
    return per_stage

"""Pure simulator of pipeline schedules: from per-stage times to a timeline, a step time and a bubble.

No torch: the planner calls it for every candidate micro-batch count, and the report draws its
timeline beside the measured one.

Each stage runs its operations in a fixed order, one at a time. A forward F(s, i) of micro-batch i
waits for F(s-1, i) plus the transfer across the cut; a backward B(s, i) waits for B(s+1, i) plus the
transfer back (the last stage's backward waits for its own forward). Transfers delay the receiver but
do not occupy either stage (they run on their own streams or NCCL channels).

GPipe, 2 stages, 4 micro-batches (F = forward, B = backward, time runs right):

    stage 0: F0 F1 F2 F3 .. .. .. .. .. B0 B1 B2 B3
    stage 1: .. F0 F1 F2 F3 B0 B1 B2 B3 ..

1F1B, same: stage s runs min(p - s - 1, m) warm-up forwards, then alternates, so it holds at most
p - s micro-batches' activations instead of m:

    stage 0: F0 F1 .. B0 F2 B1 F3 B2 .. B3
    stage 1: .. F0 B0 F1 B1 F2 B2 F3 B3
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["SCHEDULES", "Op", "Timeline", "op_order", "simulate", "ideal_efficiency"]

SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Op:
    """One forward ("F") or backward ("B") of one micro-batch on one stage."""

    stage: int
    kind: str
    micro: int
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """A simulated training step."""

    ops: list[Op]
    step_time: float
    """From the first forward to the last backward."""
    bubble_fraction: float
    """Share of stage-time spent idle: 1 - busy / (stages x step_time)."""
    peak_in_flight: list[int]
    """Per stage, the most micro-batches whose activations are held at once (forward done, backward not)."""


def op_order(schedule: str, stages: int, micro_batches: int) -> list[list[tuple[str, int]]]:
    """For each stage, the (kind, micro-batch) operations in the order it runs them."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of: {', '.join(SCHEDULES)}")
    if stages < 1 or micro_batches < 1:
        raise ValueError(f"need at least one stage and one micro-batch (got {stages}, {micro_batches})")
    m = micro_batches
    orders = []
    for s in range(stages):
        if schedule == "gpipe":
            order = [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
        else:
            warmup = min(stages - s - 1, m)
            order = [("F", i) for i in range(warmup)]
            for i in range(m - warmup):
                order += [("F", warmup + i), ("B", i)]
            order += [("B", i) for i in range(m - warmup, m)]
        orders.append(order)
    return orders


def simulate(
    forward: Sequence[float],
    backward: Sequence[float],
    micro_batches: int,
    schedule: str = "1f1b",
    transfer: Sequence[float] | None = None,
) -> Timeline:
    """Simulate one step.

    forward[s], backward[s]: time of one micro-batch's forward / backward on stage s.
    transfer[s]: time to move one micro-batch's activation (or its gradient) across the cut after stage s
    (len(forward) - 1 values; zero when omitted).
    """
    p = len(forward)
    if len(backward) != p:
        raise ValueError(f"need one backward time per stage ({len(backward)} != {p})")
    transfer = [0.0] * (p - 1) if transfer is None else list(transfer)
    if len(transfer) != p - 1:
        raise ValueError(f"need one transfer time per cut ({len(transfer)} != {p - 1})")
    orders = op_order(schedule, p, micro_batches)

    done: dict[tuple[str, int, int], float] = {}  # (kind, stage, micro) -> end time
    position = [0] * p
    free_at = [0.0] * p
    ops: list[Op] = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while position[s] < len(orders[s]):
                kind, i = orders[s][position[s]]
                ready = _ready_time(kind, s, i, p, done, transfer)
                if ready is None:
                    break
                start = max(ready, free_at[s])
                end = start + (forward[s] if kind == "F" else backward[s])
                done[(kind, s, i)] = end
                free_at[s] = end
                ops.append(Op(s, kind, i, start, end))
                position[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - op_order never produces a cycle
            raise RuntimeError(f"schedule {schedule!r} deadlocks")

    step = max(free_at) if ops else 0.0
    busy = sum(forward) * micro_batches + sum(backward) * micro_batches
    bubble = 1.0 - busy / (p * step) if step > 0 else 0.0
    return Timeline(
        ops=sorted(ops, key=lambda op: (op.start, op.stage)),
        step_time=step,
        bubble_fraction=bubble,
        peak_in_flight=[_peak_in_flight(order) for order in orders],
    )


def ideal_efficiency(stages: int, micro_batches: int) -> float:
    """m / (m + p - 1): the share of p devices' time that GPipe with equal stages keeps busy
    (Huang et al., GPipe, 2019, section 2.2)."""
    return micro_batches / (micro_batches + stages - 1)


def _ready_time(kind, s, i, p, done, transfer) -> float | None:
    if kind == "F":
        if s == 0:
            return 0.0
        prev = done.get(("F", s - 1, i))
        return None if prev is None else prev + transfer[s - 1]
    if s == p - 1:
        return done.get(("F", s, i))
    nxt = done.get(("B", s + 1, i))
    return None if nxt is None else nxt + transfer[s]


def _peak_in_flight(order: list[tuple[str, int]]) -> int:
    held = peak = 0
    for kind, _ in order:
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak

"""Pure simulator of pipeline schedules: from per-stage times to a timeline, a step time and a bubble.

No torch: the planner calls it for every candidate micro-batch count, and the report draws its
timeline beside the measured one. The schedules themselves, where their stages sit and in what order
each device runs its operations, are partition/planning/schedule_order.py.

Each device runs its operations in a fixed order (schedule.device_orders), one at a time. A forward
F(s, i) of micro-batch i waits for F(s-1, i) plus the transfer across the cut; a backward B(s, i) waits
for B(s+1, i) plus the transfer back (the last stage's backward waits for its own forward). Transfers
delay the receiver but do not occupy either device (they run on their own streams or NCCL channels). A
cut between two stages on the same device costs nothing: torch.distributed.pipelining hands the tensor
over locally instead of sending it. CPU processes standing in for devices are different (SharedCores):
they share the cores, and a send is its sender's work.

The profile may measure a whole backward only; then how it splits into I and W is an assumption:
`weight_fraction` of it is W (default one half, the paper's B = W).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pipebench.partition.planning.schedule_order import device_orders, per_stage, placement
from pipebench.base.schedules import DEFAULT_SCHEDULE

__all__ = ["Op", "Timeline", "simulate", "SharedCores", "pipeline_costs"]


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


@dataclass(frozen=True)
class SimulationOptions:
    """What `simulate` is told besides each stage's forward and backward, the micro-batch count, the
    schedule and the transfers (its keyword arguments), as one value for the steps of the simulation."""

    devices: int | None = None
    """How many devices the stages are placed on (schedule.placement); None: one per stage."""
    weight_fraction: float = 0.5
    """Without measured I and W, the share of each backward taken to be W (the rest is I): an assumption,
    since W is roughly the weight-gradient matmuls, about half of a transformer block's backward."""
    backward_input: Sequence[float] | None = None
    """In zero-bubble schedules, the measured I (input gradient) of each stage; given with
    backward_weight (the profiler measures both; together they exceed the backward), or neither."""
    backward_weight: Sequence[float] | None = None
    """The measured W (weight gradient) of each stage, with backward_input."""
    launch: dict[str, Sequence[float]] | None = None
    """On GPUs, the CPU's time to launch each kind ("F", "B", "I", "W") of operation of each stage.
    Each device then has two clocks: its CPU launches the operations one after another, running ahead of
    the GPU and of the data (a receive makes the GPU wait, not the CPU), and an operation's kernels can
    neither start before its launch starts nor end before its launch ends. With short kernels the CPU is
    the bottleneck; with long ones it hides entirely behind the GPU. Without "I", a split backward's
    launch splits as its duration does."""
    shared_cores: SharedCores | None = None
    """The devices are CPU processes sharing one machine's cores (SharedCores); None: each device
    computes on its own."""


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
    devices, weight_fraction, backward_input, backward_weight, launch, shared_cores: as SimulationOptions'
    fields say (the record the steps below share).
    """
    how = SimulationOptions(devices, weight_fraction, backward_input, backward_weight, launch, shared_cores)
    p = len(forward)
    transfer, backward_input, backward_weight = _checked_times(forward, backward, transfer, how)
    orders = device_orders(schedule, p, micro_batches, how.devices)
    hop = _hops(transfer, placement(schedule, p, how.devices))
    duration = {"F": list(forward), "B": list(backward), "I": list(backward_input), "W": list(backward_weight)}
    if how.shared_cores is not None:
        if how.launch:
            raise ValueError("launch times are a GPU's; shared cores are CPU processes'")
        ops = how.shared_cores.run(orders, duration, hop)
        return _timeline(ops, len(orders), p, orders, how.shared_cores.step_end_ms)
    ops = _play_on_own_devices(orders, duration, _launch_times(how, p), hop, schedule)
    return _timeline(ops, len(orders), p, orders)


def _checked_times(forward, backward, transfer, how: SimulationOptions) -> tuple[list, Sequence, Sequence]:
    """(transfer, I, W) of every stage, checked against the stage count: transfers zero where not given,
    I and W as measured, else each backward split by `how.weight_fraction`. ValueError names what is
    wrong, in the order checked."""
    p = len(forward)
    if len(backward) != p:
        raise ValueError(f"need one backward time per stage ({len(backward)} != {p})")
    transfer = [0.0] * (p - 1) if transfer is None else list(transfer)
    if len(transfer) != p - 1:
        raise ValueError(f"need one transfer time per cut ({len(transfer)} != {p - 1})")
    weight_fraction = how.weight_fraction
    if not 0 <= weight_fraction <= 1:
        raise ValueError(f"weight_fraction is a share of the backward, between 0 and 1 (got {weight_fraction})")
    backward_input, backward_weight = how.backward_input, how.backward_weight
    if (backward_input is None) != (backward_weight is None):
        raise ValueError("give both backward_input and backward_weight, or neither")
    if backward_input is None:
        backward_input = [(1 - weight_fraction) * b for b in backward]
        backward_weight = [weight_fraction * b for b in backward]
    if len(backward_input) != p or len(backward_weight) != p:
        raise ValueError(f"need one input and one weight gradient time per stage ({p})")
    return transfer, backward_input, backward_weight


def _hops(transfer: list[float], where: list[int]) -> list[float]:
    """What each cut's transfer costs the receiver: nothing between two stages on one device, which
    torch.distributed.pipelining hands the tensor over locally instead of sending it."""
    return [t if where[s] != where[s + 1] else 0.0 for s, t in enumerate(transfer)]


def _launch_times(how: SimulationOptions, p: int) -> dict[str, list[float]]:
    """The CPU's launch time of each kind of operation on each stage: as given, zero where not given
    (the CPU, whose one clock is the device's), and a split backward's I and W, where only the whole
    backward's launch was given, split as the duration is (weight_fraction)."""
    launch, weight_fraction = how.launch, how.weight_fraction
    cpu = {kind: list(launch[kind]) if launch and kind in launch else [0.0] * p for kind in "FBIW"}
    if launch and "I" not in launch:
        cpu["I"] = [c * (1 - weight_fraction) for c in cpu["B"]]
        cpu["W"] = [c * weight_fraction for c in cpu["B"]]
    return cpu


def _play_on_own_devices(orders, duration: dict[str, list[float]], cpu: dict[str, list[float]],
                         hop: list[float], schedule: str) -> list[Op]:
    """Play the devices' orders where each device computes on its own: an operation starts once its
    input has arrived, its device is free and its CPU has begun launching it, and ends no sooner than
    its launch does; each device's CPU launches its operations one after another (`cpu`)."""
    stages = len(duration["F"])
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
                ready = _ready_time(kind, s, i, stages, done, hop)
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
    return ops


def _timeline(ops: list[Op], devices: int, stages: int, orders, step_end: float = 0.0) -> Timeline:
    step = max((op.end for op in ops), default=0.0) + step_end
    busy = sum(op.end - op.start for op in ops)  # with measured I and W, more than F + B
    bubble = 1.0 - busy / (devices * step) if step > 0 else 0.0
    return Timeline(
        ops=sorted(ops, key=lambda op: (op.start, op.device, op.stage)),
        step_time=step,
        bubble_fraction=bubble,
        peak_in_flight=[_peak_in_flight(order) for order in per_stage(orders, stages)],
    )


@dataclass(frozen=True)
class SharedCores:
    """CPU processes standing in for devices on one machine's cores, as the pipelines run them there.

    A GPU computes on its own and sends over its own link; CPU stand-ins share the cores, the memory
    bandwidth and the network stack, so:
    - while k of the p devices compute at once, each runs 1 + (contention - 1) (k - 1) / (p - 1) times
      slower than alone (processor sharing; `contention` is the slowdown with all p busy, measured by
      hardware/cpu_processes.py for this machine at its load);
    - a send is the sender's own CPU work (gloo copies the bytes on the same cores): it lengthens the
      operation that sends, and the receiver waits for it, instead of running beside the compute;
    - every operation pays `action_ms`, the pipeline runtime's own cost of running it (its Python
      schedule, posting and waiting for its messages);
    - the step ends `step_end_ms` after the last operation: the loss's broadcast from the last stage
      (bench/strategies/planned/pp.py), one collective that every process waits for.
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


def pipeline_costs(step_ms: float, devices: int, micro_batches: int, latency_ms: float) -> tuple[float, float]:
    """(ms a hop, ms an operation) that make the simulator (SharedCores) price a 1F1B step of stages that
    compute nothing, over `devices` processes and `micro_batches` micro-batches, at the `step_ms` measured
    (hardware/cpu_processes.py's pipeline_step_ms): the figures come out in the terms they are charged in,
    whatever of the posting, the waiting for the receiver to be scheduled and the Python schedule they
    hold. A hop costs the message latency measured alone (`latency_ms`) and an operation what is left;
    where the hops alone price the step longer than measured (messages in flight overlap their
    receivers' wake-ups), a hop costs what makes them price it, and an operation 0.001 ms."""

    def step(hop: float, action: float) -> float:
        zeros = [0.0] * devices
        return simulate(zeros, zeros, micro_batches, "1f1b", [hop] * (devices - 1),
                        shared_cores=SharedCores(1.0, action)).step_time

    def solve(price) -> float:  # the figure in [0, step_ms] at which price(figure) = step_ms (price grows)
        low, high = 0.0, max(step_ms, 1e-3)
        for _ in range(40):
            middle = (low + high) / 2
            low, high = (middle, high) if price(middle) < step_ms else (low, middle)
        return (low + high) / 2

    if step(latency_ms, 0.0) <= step_ms:
        return latency_ms, max(1e-3, solve(lambda action: step(latency_ms, action)))
    return max(1e-3, solve(lambda hop: step(hop, 1e-3))), 1e-3


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

"""The Plan: where to cut, on which devices, with how many micro-batches, and what that should give.

A Plan is the contract between the partitioner and the executors: strategies never re-decide where to
cut, and reports compare its predictions with what a run measured. `make_plan` builds one from profiles
(one per candidate micro-batch size) with the exact solver and the schedule simulator; it imports no
torch, so a saved profile plans anywhere.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, Sequence

from pipebench.files import read_json, record, write_json
from pipebench.partition import schedule as sched
from pipebench.partition.profile import Profile
from pipebench.partition.solver import InfeasibleError, solve, stage_times
from pipebench.errors import UserError

__all__ = ["BALANCES", "StagePlan", "Plan", "PlanError", "make_plan", "hand_plan", "uniform_bounds", "OPTIMIZER_STATES"]

FORMAT = "pipebench-plan"
VERSION = 1

BALANCES = ("time", "params", "uniform")
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2}
"""Tensors of parameter size an optimizer keeps per parameter (besides the parameter and its gradient)."""


class PlanError(UserError):
    """A plan file that is missing, unreadable or malformed; the message names the field."""


@dataclass
class StagePlan:
    index: int
    device: str
    first_layer: int
    end_layer: int
    """Layers [first_layer, end_layer) of the model."""
    layers: list[str]
    params: int
    forward_ms: float
    """One micro-batch, at the stage's speed."""
    backward_ms: float
    activation_out_bytes: int
    """Bytes sent to the next stage per micro-batch (0 for the last stage)."""
    peak_in_flight: int
    """Micro-batches whose activations the stage holds at once under the schedule."""
    predicted_memory_bytes: int
    """Parameters, gradients and optimizer state, plus saved activations x peak_in_flight."""
    input_shape: list[int] = field(default_factory=list)
    """One micro-batch's input to the stage, as profiled (torch.distributed.pipelining needs it)."""
    input_dtype: str = ""
    backward_input_ms: float | None = None
    """Zero-bubble schedules' I and W of one micro-batch at the stage's speed; None when not profiled."""
    backward_weight_ms: float | None = None


@dataclass
class Plan:
    model: str
    flavour: str
    batch: int
    micro_batches: int
    micro_batch_size: int
    schedule: str
    balanced_by: str
    """What the cuts balance: "time" (profiled forward + backward), "params" or "uniform" (layer counts)."""
    device_name: str
    bounds: list[int]
    stages: list[StagePlan]
    predicted_step_ms: float
    predicted_samples_per_s: float
    bubble_fraction: float
    balance_ratio: float
    """Slowest stage over mean stage (forward + backward): 1.0 is perfect balance."""
    optimizer: str = "sgd"
    link_gbps: float = 0.0
    """Bandwidth used to price activation transfers (0: transfers free)."""
    virtual_stages: int = 1
    """Stages per device: 2 or more for the interleaved and zero-bubble schedules."""
    config: dict[str, Any] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    """Each micro-batch count considered: micro_batches, predicted_step_ms, samples_per_s, or why not."""
    placement: list[int] = field(default_factory=list)
    """The device index (0 .. device_count - 1) of each stage, as the schedule places it: the one place
    every executor reads it from (partition.schedule.placement computes it when the plan is made)."""

    def __post_init__(self):
        if not self.placement:  # plans written before placement was stored
            self.placement = sched.placement(self.schedule, len(self.stages), len(self.stages) // self.virtual_stages)
        if len(self.placement) != len(self.stages) or len(self.bounds) != len(self.stages) + 1:
            raise PlanError(f"plan: {len(self.stages)} stages, {len(self.bounds)} bounds and "
                            f"{len(self.placement)} placements do not agree")

    # ------------------------------------------------------------------------------------- the file

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, **asdict(self)}

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_dict())

    @property
    def plan_id(self) -> str:
        """A short hash of the plan's content: results rows name the plan they ran by it."""
        text = json.dumps(asdict(self), sort_keys=True, allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: Any, where: str = "plan") -> "Plan":
        """A Plan from its JSON object (format and version checked when present: plans saved before the
        plan had a format load too), every field checked."""
        if not isinstance(data, dict):
            raise PlanError(f"{where}: expected an object")
        values = dict(data)
        if "format" in values or "version" in values:
            if values.pop("format", None) != FORMAT or values.pop("version", None) != VERSION:
                raise PlanError(f"{where}: not a pipebench plan version {VERSION} "
                                f"(format {data.get('format')!r}, version {data.get('version')!r})")
        if isinstance(values.get("balance"), str):  # before balanced_by had its name
            values["balanced_by"] = values.pop("balance")
        return record(cls, values, where, error=PlanError)

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        return cls.from_dict(read_json(path, kind="plan", error=PlanError), str(path))

    # ------------------------------------------------------------------- handing the plan to others

    @property
    def balance(self) -> list[int]:
        """Layers per stage, in stage order: torchgpipe's `balance` (GPipe(module, balance, chunks=m))."""
        return [b - a for a, b in zip(self.bounds, self.bounds[1:])]

    def split_spec(self) -> dict[str, Any]:
        """{layer name: SplitPoint.BEGINNING} at every cut, for torch.distributed.pipelining:

            pipe = pipeline(module, mb_args=(x,), split_spec=plan.split_spec())

        builds exactly this plan's stages (stage k begins at the first layer of StagePlan k)."""
        from torch.distributed.pipelining import SplitPoint

        return {stage.layers[0]: SplitPoint.BEGINNING for stage in self.stages[1:]}

    def stages_on(self, device: int) -> list[int]:
        """The stage indices that device `device` runs, in increasing order."""
        return [s for s, d in enumerate(self.placement) if d == device]

    @property
    def devices(self) -> list[str]:
        """The device of each stage (a device appears v times with v virtual stages)."""
        return [s.device for s in self.stages]

    @property
    def device_count(self) -> int:
        return len(self.stages) // self.virtual_stages

    def simulate(self) -> sched.Timeline:
        """The step this Plan predicts, as the simulator's timeline (what the report draws)."""
        transfer = [transfer_ms(s.activation_out_bytes, self.link_gbps) for s in self.stages[:-1]]
        split = all(s.backward_input_ms is not None and s.backward_weight_ms is not None for s in self.stages)
        return sched.simulate([s.forward_ms for s in self.stages], [s.backward_ms for s in self.stages],
                              self.micro_batches, self.schedule, transfer, devices=self.device_count,
                              backward_input=[s.backward_input_ms for s in self.stages] if split else None,
                              backward_weight=[s.backward_weight_ms for s in self.stages] if split else None)

    def memory_per_device(self) -> list[int]:
        """Predicted peak bytes per device: the sum over the stages it runs."""
        totals = [0] * self.device_count
        for stage, device in zip(self.stages, self.placement):
            totals[device] += stage.predicted_memory_bytes
        return totals


def transfer_ms(nbytes: float, link_gbps: float) -> float:
    """Time to move `nbytes` across a link of `link_gbps` GB/s (0 when transfers are not priced)."""
    return nbytes / (link_gbps * 1e9) * 1e3 if link_gbps > 0 else 0.0


def uniform_bounds(layers: int, stages: int) -> list[int]:
    """Equal layer counts per stage (the earlier stages take the remainder)."""
    if stages > layers:
        raise UserError(f"more stages than layers ({stages} > {layers})")
    base, extra = divmod(layers, stages)
    bounds = [0]
    for s in range(stages):
        bounds.append(bounds[-1] + base + (1 if s < extra else 0))
    return bounds


def hand_plan(model: str, layers: Sequence[str], *, batch: int, devices: Sequence[str], flavour: str = "",
              config: dict[str, Any] | None = None, schedule: str = "gpipe", micro_batches: int = 1,
              virtual_stages: int = 1, bounds: Sequence[int] | None = None) -> Plan:
    """A Plan with cuts given by hand (default: equal layer counts), for a model not profiled: it runs
    like any Plan but predicts nothing (its predicted figures are 0). The way to try a split of your own,
    and what the tests use to run many splits without profiling."""
    if schedule not in sched.SCHEDULES:
        raise UserError(f"unknown schedule {schedule!r}; choose one of: {', '.join(sched.SCHEDULES)}")
    if micro_batches < 1 or batch % micro_batches:
        raise UserError(f"batch {batch} does not split into {micro_batches} equal micro-batches")
    p = len(devices) * virtual_stages
    by_hand = bounds is not None
    bounds = list(bounds) if by_hand else uniform_bounds(len(layers), p)
    if len(bounds) != p + 1 or bounds[0] != 0 or bounds[-1] != len(layers) or any(
            a >= b for a, b in zip(bounds, bounds[1:])):
        raise UserError(f"bounds {bounds} are not {p} non-empty stages of {len(layers)} layers")
    where = sched.placement(schedule, p, len(devices))
    stages = [StagePlan(index=s, device=str(devices[where[s]]), first_layer=a, end_layer=b, layers=list(layers[a:b]),
                        params=0, forward_ms=0.0, backward_ms=0.0, activation_out_bytes=0, peak_in_flight=0,
                        predicted_memory_bytes=0)
              for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    return Plan(model=model, flavour=flavour, batch=batch, micro_batches=micro_batches,
                micro_batch_size=batch // micro_batches, schedule=schedule,
                balanced_by="hand" if by_hand else "uniform", device_name="", bounds=bounds,
                stages=stages, predicted_step_ms=0.0, predicted_samples_per_s=0.0, bubble_fraction=0.0,
                balance_ratio=1.0, virtual_stages=virtual_stages, config=dict(config or {}), placement=list(where))


def make_plan(
    profiles: Sequence[Profile],
    devices: Sequence[str],
    *,
    schedule: str = "1f1b",
    balance: str = "time",
    micro_batches: int | None = None,
    max_memory: float | Sequence[float] | None = None,
    speeds: Sequence[float] | None = None,
    link_gbps: float = 0.0,
    optimizer: str = "sgd",
    virtual_stages: int = 1,
    min_micro_batches: int = 1,
) -> Plan:
    """Plan `virtual_stages` stages per entry of `devices`, placed as `schedule` places them.

    profiles: the model profiled at one or more micro-batch sizes (same model and global batch).
    micro_batches: use this count (its profile must be among `profiles`); None picks the count with the
        highest predicted throughput among those profiled.
    max_memory: bytes per device (one figure or one per device); the plan never exceeds it. With v stages
        per device each stage gets 1/v of its device's cap (a simplification that never overshoots).
    speeds: per-device speed factors relative to the profiled device (2.0 = twice as fast).
    link_gbps: GB/s between neighbouring stages; activation transfers are priced at bytes / bandwidth.
    min_micro_batches: the fewest micro-batches the executor accepts (torch's Schedule1F1B wants one per
        stage at least); fewer are neither picked nor accepted.
    """
    if balance not in BALANCES:
        raise UserError(f"unknown balance {balance!r}; choose one of: {', '.join(BALANCES)}")
    if optimizer not in OPTIMIZER_STATES:
        raise UserError(f"unknown optimizer {optimizer!r}; choose one of: {', '.join(OPTIMIZER_STATES)}")
    if schedule not in sched.SCHEDULES:
        raise UserError(f"unknown schedule {schedule!r}; choose one of: {', '.join(sched.SCHEDULES)}")
    if not profiles:
        raise UserError("need at least one profile")
    if virtual_stages < 1:
        raise UserError(f"need at least one stage per device (got {virtual_stages})")
    sched.placement(schedule, len(devices) * virtual_stages, len(devices))  # one clear error if it does not fit
    batch = profiles[0].batch
    by_count = {p.micro_batches: p for p in profiles}
    if micro_batches is not None:
        if micro_batches < 1 or batch % micro_batches:
            raise UserError(f"batch {batch} does not split into {micro_batches} equal micro-batches")
        if micro_batches not in by_count:
            have = ", ".join(str(m) for m in sorted(by_count))
            raise UserError(f"no profile at micro-batch size {batch // micro_batches} "
                             f"({micro_batches} micro-batches); profiled counts: {have}")
        if micro_batches < min_micro_batches:
            raise UserError(f"{micro_batches} micro-batch(es) are too few: this schedule needs at least "
                             f"{min_micro_batches}")
        counts = [micro_batches]
    else:
        counts = [m for m in sorted(by_count) if m >= min_micro_batches]
        if not counts:
            raise UserError(f"no profiled micro-batch count reaches the {min_micro_batches} this schedule needs "
                             f"(profiled: {', '.join(str(m) for m in sorted(by_count))})")

    candidates: list[dict[str, Any]] = []
    best: Plan | None = None
    first_error: InfeasibleError | None = None
    for m in counts:
        try:
            plan = _plan_for(by_count[m], devices, schedule, balance, max_memory, speeds, link_gbps, optimizer,
                             virtual_stages)
        except InfeasibleError as exc:
            candidates.append({"micro_batches": m, "infeasible": str(exc)})
            if first_error is None or exc.needed < first_error.needed:
                first_error = exc
            continue
        candidates.append(_candidate(plan))
        if best is None or plan.predicted_samples_per_s > best.predicted_samples_per_s * (1 + 1e-9):
            best = plan
    if best is None:
        assert first_error is not None
        raise first_error
    if balance == "time":
        best = _plan_for(by_count[best.micro_batches], devices, schedule, balance, max_memory, speeds, link_gbps,
                         optimizer, virtual_stages, polish=True)
        candidates = [_candidate(best) if c["micro_batches"] == best.micro_batches else c for c in candidates]
    best.candidates = candidates
    return best


def _candidate(plan: Plan) -> dict[str, Any]:
    """What `Plan.candidates` records of one micro-batch count that fits."""
    return {
        "micro_batches": plan.micro_batches,
        "predicted_step_ms": plan.predicted_step_ms,
        "samples_per_s": plan.predicted_samples_per_s,
        "bubble_fraction": plan.bubble_fraction,
    }


def _plan_for(profile, devices, schedule, balance, max_memory, speeds, link_gbps, optimizer, virtual_stages,
              polish=False) -> Plan:
    layers = profile.layers
    v = virtual_stages
    p = len(devices) * v  # stages
    n = len(layers)
    if p > n:
        raise UserError(f"more stages than layers ({p} > {n})")
    m = profile.micro_batches
    where = sched.placement(schedule, p, len(devices))  # device index of each stage
    device_speeds = [1.0] * len(devices) if speeds is None else list(speeds)
    if len(device_speeds) != len(devices):
        raise UserError(f"need one speed per device ({len(device_speeds)} != {len(devices)})")
    speeds = [device_speeds[d] for d in where]
    costs = [layer.step_ms for layer in layers]
    # Price a cut at the time its activation takes to cross the link (the gradient crosses back alike).
    prices = [transfer_ms(layer.output_bytes, link_gbps) for layer in layers[:-1]]
    states = 2 + OPTIMIZER_STATES[optimizer]
    # Memory per layer for the solver, with the most micro-batches any stage may hold under the schedule
    # (1F1B holds at most p; interleaved and zero-bubble schedules are counted as holding all m).
    worst_in_flight = min(m, p) if schedule == "1f1b" else m
    memory = [layer.param_bytes * states + layer.saved_bytes * worst_in_flight for layer in layers]
    caps = None
    if max_memory is not None:
        per_device = ([float(max_memory)] * len(devices) if isinstance(max_memory, (int, float))
                      else [float(c) for c in max_memory])
        if len(per_device) != len(devices):
            raise UserError(f"need one memory cap per device ({len(per_device)} != {len(devices)})")
        caps = [per_device[d] / v for d in where]

    if balance == "time":
        bounds = solve(costs, p, speeds=speeds, memory=memory if caps else None, caps=caps, cut_prices=prices)
        if polish:
            bounds = _polish(bounds, layers, m, schedule, costs, speeds, prices, memory, caps, len(devices))
    elif balance == "params":
        bounds = solve([layer.params for layer in layers], p)  # DeepSpeed's default: parameter counts
    else:
        bounds = uniform_bounds(n, p)

    times = _stage_times_ms(_prefix_sums(layers), bounds, speeds)
    fwd, bwd = times["forward"], times["backward"]
    timeline = _simulate(times, m, schedule, [prices[b - 1] for b in bounds[1:-1]], len(devices))
    stage_compute = stage_times(costs, bounds, speeds=speeds)
    stages = []
    for s, (a, b) in enumerate(zip(bounds, bounds[1:])):
        held = timeline.peak_in_flight[s]
        stages.append(StagePlan(
            index=s,
            device=str(devices[where[s]]),
            first_layer=a,
            end_layer=b,
            layers=[l.name for l in layers[a:b]],
            params=sum(l.params for l in layers[a:b]),
            forward_ms=fwd[s],
            backward_ms=bwd[s],
            activation_out_bytes=layers[b - 1].output_bytes if b < n else 0,
            peak_in_flight=held,
            predicted_memory_bytes=int(sum(l.param_bytes * states + l.saved_bytes * held for l in layers[a:b])),
            input_shape=list(profile.input_shape if a == 0 else layers[a - 1].output_shape),
            input_dtype=profile.input_dtype if a == 0 else layers[a - 1].output_dtype,
            backward_input_ms=times["input"][s] if "input" in times else None,
            backward_weight_ms=times["weight"][s] if "weight" in times else None,
        ))
    step_ms = timeline.step_time
    return Plan(
        model=profile.model,
        flavour=profile.flavour,
        config=dict(profile.config),
        batch=profile.batch,
        micro_batches=m,
        micro_batch_size=profile.micro_batch,
        schedule=schedule,
        balanced_by=balance,
        device_name=profile.device_name,
        bounds=list(bounds),
        stages=stages,
        predicted_step_ms=step_ms,
        predicted_samples_per_s=profile.batch / step_ms * 1e3 if step_ms > 0 else float("inf"),
        bubble_fraction=timeline.bubble_fraction,
        balance_ratio=max(stage_compute) / (sum(stage_compute) / p) if sum(stage_compute) > 0 else 1.0,
        optimizer=optimizer,
        link_gbps=link_gbps,
        virtual_stages=v,
        placement=list(where),
    )


def _prefix_sums(layers) -> dict[str, list[float]]:
    """Running sums of the layers' forward and backward (and, when profiled, I and W) times."""
    figures = {"forward": "forward_ms", "backward": "backward_ms"}
    if all(l.backward_input_ms is not None and l.backward_weight_ms is not None for l in layers):
        figures.update(input="backward_input_ms", weight="backward_weight_ms")
    return {key: [0.0, *accumulate(getattr(l, name) for l in layers)] for key, name in figures.items()}


def _stage_times_ms(prefix: dict[str, list[float]], bounds, speeds) -> dict[str, list[float]]:
    """Each stage's times for one micro-batch at its device's speed, for the cuts `bounds`.

    torch's zero-bubble schedules skip I on the first stage (its input needs no gradient) and run its
    whole backward as W, so stage 0 gets I = 0 and W = its backward."""
    times = {key: [(sums[b] - sums[a]) / v for a, b, v in zip(bounds, bounds[1:], speeds)]
             for key, sums in prefix.items()}
    if "input" in times:
        times["input"][0], times["weight"][0] = 0.0, times["backward"][0]
    return times


def _simulate(times: dict[str, list[float]], m, schedule, transfer, devices) -> sched.Timeline:
    return sched.simulate(times["forward"], times["backward"], m, schedule, transfer, devices=devices,
                          backward_input=times.get("input"), backward_weight=times.get("weight"))


def _polish(bounds, layers, m, schedule, costs, speeds, prices, memory, caps, devices) -> list[int]:
    """Among cuts that keep the optimal slowest stage (and the caps), move cuts one layer at a time while
    the simulated step gets shorter (with several stages per device, any cuts within the caps).

    The solver's objective, the slowest stage, sets the steady-state pace; with few micro-batches the
    fill and drain also count, and several optimal partitions can differ there. This is a tie-break on
    top of the exact optimum, never a trade against it."""
    # One stage per device: keep the solver's optimal slowest stage. Several stages per device (loops or a
    # V): what counts is each device's sum of stages, which the slowest stage does not capture, so the walk
    # may trade stage balance for a shorter simulated step.
    limit = (max(stage_times(costs, bounds, speeds=speeds, cut_prices=prices)) * (1 + 1e-9)
             if devices == len(bounds) - 1 else float("inf"))
    prefix = _prefix_sums(layers)
    mem_prefix = [0.0, *accumulate(memory)]

    def step(cand):
        times = _stage_times_ms(prefix, cand, speeds)
        return _simulate(times, m, schedule, [prices[b - 1] for b in cand[1:-1]], devices).step_time

    def allowed(cand):
        if any(a >= b for a, b in zip(cand, cand[1:])):
            return False
        if max(stage_times(costs, cand, speeds=speeds, cut_prices=prices)) > limit:
            return False
        return caps is None or all(mem_prefix[b] - mem_prefix[a] <= c for a, b, c in zip(cand, cand[1:], caps))

    best, best_step = list(bounds), step(bounds)
    for _ in range(4 * len(bounds) + (len(layers) if limit == float("inf") else 0)):  # one cut moves per round
        moves = [best[:k] + [best[k] + d] + best[k + 1:] for k in range(1, len(best) - 1) for d in (-1, 1)]
        scored = [(step(c), c) for c in moves if allowed(c)]
        if not scored or min(scored)[0] >= best_step * (1 - 1e-9):
            break
        best_step, best = min(scored)
    return best

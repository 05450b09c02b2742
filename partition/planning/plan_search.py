"""The search inside `plan_for` (partition/planning/plan.py), for one profiled micro-batch count: the problem
(`problem_of`: placement, speeds, caps, calibration, cut prices, stage costs), the bounds on the cut
(`bounds_of`), the cut and which stages recompute (`solved`), and its simulated step (`simulated`).
Apart from the Plan record so that each reads on its own; no torch, as the rest of the planner.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

from pipebench.partition.planning import schedule_order as sched
from pipebench.partition.planning import simulator as sim
from pipebench.partition.planning.cuts import (EVERY_CUT_LIMIT, StageCost, cut_prices, no_worse_than_baselines, polish_cuts,
                                      shortest_of_all_cuts, simulate_stages, stage_scale)
from pipebench.partition.planning.memory import StageMemory, recomputing, unmodelled_bytes
from pipebench.partition.profiling.profile_record import Profile
from pipebench.partition.planning.solver import InfeasibleError, solve, solve_intervals
from pipebench.request import Request, check_stage_count
from pipebench.base.schedules import get_schedule

__all__ = ["Problem", "Simulated", "problem_of", "bounds_of", "solved", "simulated", "uniform_bounds"]


def uniform_bounds(layers: int, stages: int) -> list[int]:
    """Equal layer counts per stage (the earlier stages take the remainder)."""
    check_stage_count(stages, layers)
    base, extra = divmod(layers, stages)
    bounds = [0]
    for s in range(stages):
        bounds.append(bounds[-1] + base + (1 if s < extra else 0))
    return bounds


@dataclass(frozen=True)
class Problem:
    """What one micro-batch count's plan is solved over, worked out once from the profile and the request:
    the steps of plan_for (solve, simulate, the stages, the record) each read it instead of a dozen
    arguments."""

    profile: Profile
    others: Sequence[Profile]
    """The profiles of the other counts (one of them may hold the whole step that calibrates this one)."""
    request: Request
    checkpoint: str
    """The Training's checkpoint mode as this schedule can run it: never for a split backward."""
    where: list[int]
    """The device index of each stage."""
    speeds: list[float]
    """Each stage's device speed."""
    scale: float
    """The calibration: the profile's whole step over its segments' sum."""
    prices: list[float]
    """What a cut after each layer costs (ms), from the link."""
    memory: StageMemory
    caps: list[float] | None
    """Each stage's memory cap (its device's cap shared among its virtual stages); None: uncapped."""
    keep: StageCost
    """The stages' costs keeping their activations."""
    recompute: StageCost
    """The stages' costs recomputing them (activation checkpointing)."""
    shared: sim.SharedCores | None
    link_gbps: float
    latency_ms: float

    @property
    def layers(self):
        return self.profile.layers

    @property
    def stages(self) -> int:
        return self.request.stages

    @property
    def micro_batches(self) -> int:
        return self.profile.micro_batches

    @property
    def schedule(self) -> str:
        return self.request.schedule

    @property
    def device_count(self) -> int:
        return len(self.request.devices)


def problem_of(profile: Profile, request: Request, links: tuple[float, float], others: Sequence[Profile],
               shared: sim.SharedCores | None) -> Problem:
    """The problem of `profile`'s count under `request`: the schedule's checkpoint mode, the placement,
    each stage's speed and cap, the calibration, the cut prices and the stage costs both ways (keeping
    and recomputing), so that each later step asks for them by name. The stage count against the layers
    its callers checked (make_plan through Request.check_profiles, plan_with_bounds through its bounds)."""
    layers, devices, schedule = profile.layers, request.devices, request.schedule
    link_gbps, latency = links
    checkpoint = request.training.checkpoint
    if get_schedule(schedule).split_backward:  # auto recomputes where it can; these schedules cannot
        checkpoint = "never"
    p = request.stages
    where = sched.placement(schedule, p, len(devices))
    device_speeds = [1.0] * len(devices) if request.speeds is None else list(request.speeds)
    speeds = [device_speeds[d] for d in where]
    scale = stage_scale([profile, *others], p)
    prices = cut_prices(layers, link_gbps, latency)
    memory = StageMemory(layers, 2 + request.training.states, schedule, profile.micro_batches, p,
                         unmodelled=unmodelled_bytes([profile, *others], profile.micro_batch))
    caps = None
    if request.max_memory is not None:
        per_device = ([request.max_memory] * len(devices) if isinstance(request.max_memory, float)
                      else list(request.max_memory))
        caps = [per_device[d] / request.virtual_stages for d in where]
    keep = StageCost(layers, speeds, prices, scale, shared)
    recompute = StageCost([recomputing(l) for l in layers], speeds, prices, scale, shared)
    return Problem(profile=profile, others=others, request=request, checkpoint=checkpoint, where=where,
                    speeds=speeds, scale=scale, prices=prices, memory=memory, caps=caps, keep=keep,
                    recompute=recompute, shared=shared, link_gbps=link_gbps, latency_ms=latency)


def bounds_of(problem: Problem, cost: StageCost, per_layer: list[float], *, given: Sequence[int] | None,
              polish: bool, notes: list[str]) -> list[int]:
    """The cut on `cost` with each layer's memory `per_layer`: the one `given`, else by the request's
    balance. Balanced by time, the exact solver's cut; polished, then walked on the simulated step (the
    solver balances the slowest stage, the step also pays the bubble and the sends) and never worse than
    the baselines' cuts, which `notes` then names."""
    layers, p, n, caps, prices = problem.layers, problem.stages, len(problem.layers), problem.caps, problem.prices
    balance = problem.request.balance
    if given is not None:
        return list(given)
    if balance == "params":
        return solve([layer.params for layer in layers], p)  # DeepSpeed's default: parameter counts
    if balance != "time":
        return uniform_bounds(n, p)
    # Additive costs take the fast solver; with CPU launch times a stage costs the larger of two sums,
    # which the exact dynamic programme handles (under caps, after the fast solver has said whether
    # anything fits, naming what does not).
    if not cost.launch_bound or caps:
        bounds = solve([problem.scale * layer.step_ms for layer in cost.layers], p,
                       speeds=problem.speeds, memory=per_layer if caps else None, caps=caps, cut_prices=prices)
    if cost.launch_bound:
        bounds = solve_intervals(n, p, cost.stage, memory=per_layer if caps else None, caps=caps,
                                 cut_prices=prices)
    if polish:
        m, schedule, devices = problem.micro_batches, problem.schedule, problem.device_count
        bounds = polish_cuts(bounds, m, schedule, cost, per_layer, caps, devices)
        if math.comb(n - 1, p - 1) <= EVERY_CUT_LIMIT:  # the baselines are among every cut
            return shortest_of_all_cuts(bounds, m, schedule, cost, per_layer, caps, devices, notes)
        bounds = no_worse_than_baselines(bounds, m, schedule, cost, per_layer, caps, devices,
                                         {"parameter-balanced": solve([l.params for l in layers], p),
                                          "layer-count": uniform_bounds(n, p)}, notes)
    return bounds


def solved(problem: Problem, *, given: Sequence[int] | None, polish: bool,
           notes: list[str]) -> tuple[list[int], list[bool]]:
    """(the cut, which stages recompute) under the checkpoint mode: always and never cut on their own
    costs; auto keeps every activation where the caps allow it and otherwise cuts as if recomputing, then
    recomputes only on the stages that would not fit keeping theirs."""
    p, memory = problem.stages, problem.memory

    def cut(recomputing: bool) -> list[int]:
        cost = problem.recompute if recomputing else problem.keep
        return bounds_of(problem, cost, memory.per_layer(recomputing), given=given, polish=polish, notes=notes)

    if problem.checkpoint == "always":
        return cut(True), [True] * p
    if problem.checkpoint == "never":
        return cut(False), [False] * p
    try:  # auto: recompute only where the caps require it
        return cut(False), [False] * p
    except InfeasibleError:
        bounds = cut(True)
    held = simulate_stages(problem.recompute.times(bounds), problem.micro_batches, problem.schedule, [0.0] * (p - 1),
                           problem.device_count).peak_in_flight
    return bounds, [memory.stage(a, b, held[s], False) > problem.caps[s]
                    for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]


class Simulated(NamedTuple):
    """The chosen cut's stage times by kind, its CPU launch times (None without them) and the schedule
    played out on them."""

    times: dict[str, list[float]]
    launches: dict[str, list[float]] | None
    timeline: sim.Timeline


def simulated(problem: Problem, bounds: list[int], recompute: list[bool]) -> Simulated:
    """The step of the cut: each stage timed as it runs (keeping or recomputing), the sends priced at
    each cut, the schedule simulated on them."""

    def mixed(keeping, recomputing):
        if keeping is None:
            return None
        return {key: [r if again else k for k, r, again in zip(values, recomputing.get(key, values), recompute)]
                for key, values in keeping.items()}  # no I and W when recomputing: never zero-bubble

    times = mixed(problem.keep.times(bounds), problem.recompute.times(bounds))
    launches = mixed(problem.keep.launches(bounds), problem.recompute.launches(bounds))
    timeline = simulate_stages(times, problem.micro_batches, problem.schedule,
                               [problem.prices[b - 1] for b in bounds[1:-1]], problem.device_count, launches,
                               problem.shared)
    return Simulated(times, launches, timeline)

"""What any cut of the layers costs, and the search among cuts on the simulated step.

`StageCost` prices a stage of layers [a, b) per micro-batch on both clocks (the device's and the CPU's
launches); `cut_prices` prices each cut's transfer. The solver (partition/planning/solver.py) is exact for the
slowest stage; the step a Plan shows is the simulator's (partition/planning/simulator.py), which also holds the fill,
the drain and each transfer, so the planner (partition/planning/plan.py) then walks the solver's cut on the
simulated step (`polish_cuts`), tries every cut where there are few (`shortest_of_all_cuts`), or else keeps
the baselines' cuts where they come out shorter (`no_worse_than_baselines`). Pure: no torch."""
from __future__ import annotations

from itertools import accumulate, combinations
from typing import Sequence

from pipebench.partition.planning import simulator as sim
from pipebench.partition.profiling.profile_record import Profile, calibration
from pipebench.partition.planning.memory import within_caps

__all__ = ["transfer_ms", "cut_prices", "stage_scale", "StageCost", "simulate_stages", "polish_cuts", "shortest_of_all_cuts",
           "no_worse_than_baselines", "EVERY_CUT_LIMIT"]


def transfer_ms(nbytes: float, link_gbps: float, latency_ms: float = 0.0) -> float:
    """Time to move `nbytes` across a link of `link_gbps` GB/s, plus its fixed cost (0 when transfers are
    not priced)."""
    return nbytes / (link_gbps * 1e9) * 1e3 + latency_ms if link_gbps > 0 else 0.0



def stage_scale(profiles: Sequence[Profile], stages: int) -> float:
    """The factor on every device time of a plan of `stages` stages (profile.calibration). The whole step
    prices what the segments leave out (loss, update, a long step's clocks). Where it came out faster than
    its segments, that is the eager module's own speed, which only a one-stage plan (the single baseline)
    runs; a pipeline's stages run the split segments as profiled."""
    scale = calibration(list(profiles))
    return scale if stages == 1 else max(scale, 1.0)


def cut_prices(layers, link_gbps: float, latency_ms: float = 0.0) -> list[float]:
    """The price of a cut after each layer but the last: the time its activation takes to cross the link
    (the gradient crosses back alike)."""
    return [transfer_ms(layer.output_bytes, link_gbps, latency_ms) for layer in layers[:-1]]


class StageCost:
    """What a stage costs per micro-batch, from the layers' figures, for any cuts.

    On a GPU the profile has each layer's device time and its CPU launch time. The CPU launches a stage's
    operations one after another while the GPU runs earlier ones, so over a step a stage costs the larger
    of its CPU sum and its device sum (the device sum at the device's speed): short kernels cost their
    launches, long ones hide them. The simulator plays both clocks (simulator.simulate's `launch`). Without
    launch times (the CPU, older profiles) a stage costs its device sum."""

    FIGURES = {"forward": "forward_ms", "backward": "backward_ms", "input": "backward_input_ms",
               "weight": "backward_weight_ms"}
    LETTERS = {"forward": "F", "backward": "B", "input": "I", "weight": "W"}

    def __init__(self, layers, speeds: Sequence[float], prices: Sequence[float], scale: float = 1.0,
                 shared: sim.SharedCores | None = None):
        """scale: the profile's calibration (profile.calibration), on every device and launch time; shared:
        CPU processes sharing the cores (what the simulator then charges)."""
        self.shared = shared
        figures = dict(self.FIGURES)
        if not all(l.backward_input_ms is not None and l.backward_weight_ms is not None for l in layers):
            del figures["input"], figures["weight"]
        self.speeds, self.prices, self.layers = list(speeds), list(prices), list(layers)
        self.device = {key: [0.0, *accumulate(scale * getattr(l, name) for l in layers)]
                       for key, name in figures.items()}
        self.launch_bound = any(getattr(l, name.replace("_ms", "_cpu_ms")) is not None
                                for l in layers for name in figures.values())
        # The calibration on both clocks: the whole step it comes from is bound by whichever of the two
        # binds. On the device clock alone, a launch-bound single step stays at its segments' launches
        # (ConvNeXt-S on an H200: predicted 84.4 ms where the profile's own whole step takes 77.1).
        self.cpu = {key: [0.0, *accumulate(scale * _cpu_ms(l, name) for l in layers)] for key, name in figures.items()
                    } if self.launch_bound else {}

    def kind(self, key: str, s: int, a: int, b: int) -> float:
        """Stage s's device time of one kind ("forward", "backward", "input", "weight") over layers [a, b)."""
        return (self.device[key][b] - self.device[key][a]) / self.speeds[s]

    def stage(self, s: int, a: int, b: int) -> float:
        """Forward plus backward of one micro-batch, on the busier of the two clocks: what the solver balances."""
        took = self.kind("forward", s, a, b) + self.kind("backward", s, a, b)
        if not self.cpu:
            return took
        return max(took, sum(self.cpu[key][b] - self.cpu[key][a] for key in ("forward", "backward")))

    def bottleneck(self, bounds) -> float:
        """The slowest stage with the prices of the cuts it receives from and sends to."""
        cuts = [0.0, *(self.prices[b - 1] for b in bounds[1:-1]), 0.0]
        return max(self.stage(s, a, b) + cuts[s] + cuts[s + 1] for s, (a, b) in enumerate(zip(bounds, bounds[1:])))

    def times(self, bounds) -> dict[str, list[float]]:
        """Each stage's device times of every kind, for the simulator.

        torch's zero-bubble schedules skip I on the first stage (its input needs no gradient) and run its
        whole backward as W, so stage 0 gets I = 0 and W = its backward."""
        times = {key: [self.kind(key, s, a, b) for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]
                 for key in self.device}
        return _first_stage_all_weight(times, "input", "weight", "backward")

    def launches(self, bounds) -> dict[str, list[float]] | None:
        """Each stage's CPU launch times by kind letter ("F", "B", "I", "W"); None without launch times."""
        if not self.cpu:
            return None
        cpu = {self.LETTERS[key]: [sums[b] - sums[a] for a, b in zip(bounds, bounds[1:])]
               for key, sums in self.cpu.items()}
        return _first_stage_all_weight(cpu, "I", "W", "B")


def _first_stage_all_weight(times: dict, i: str, w: str, b: str) -> dict:
    if i in times:
        times[i][0], times[w][0] = 0.0, times[b][0]
    return times


def _cpu_ms(layer, name: str) -> float:
    """A layer's CPU launch time of one figure; where it was not timed apart, its one time."""
    cpu = getattr(layer, name.replace("_ms", "_cpu_ms"))
    return getattr(layer, name) if cpu is None else cpu


def simulate_stages(times: dict[str, list[float]], m, schedule, transfer, devices,
                    launches: dict[str, list[float]] | None = None,
                    shared: sim.SharedCores | None = None) -> sim.Timeline:
    """The schedule simulated on the stages' times by kind (`StageCost.times`)."""
    return sim.simulate(times["forward"], times["backward"], m, schedule, transfer, devices=devices,
                          backward_input=times.get("input"), backward_weight=times.get("weight"), launch=launches,
                          shared_cores=shared)


def _cut_step(bounds, m, schedule, cost: StageCost, devices) -> float:
    """The simulated step of the stages that `bounds` cut, as the plan prices it."""
    return simulate_stages(cost.times(bounds), m, schedule, [cost.prices[b - 1] for b in bounds[1:-1]], devices,
                           cost.launches(bounds), cost.shared).step_time


def _within_caps(bounds, mem_prefix, caps) -> bool:
    """Every stage's memory (from the layers' prefix sums) within its cap; True without caps."""
    return within_caps([mem_prefix[b] - mem_prefix[a] for a, b in zip(bounds, bounds[1:])], caps)


def no_worse_than_baselines(bounds, m, schedule, cost: StageCost, memory, caps, devices, baselines: dict,
                             notes: list[str]) -> list[int]:
    """The solver's cuts, unless a baseline's cuts that fit the caps make a shorter simulated step.

    The solver minimises the slowest stage, and `polish_cuts` walks from there on the simulated step; the
    step also holds the fill and drain and each cut's transfer, so with few micro-batches a baseline
    can come out ahead. The plan shown beside a baseline is never predicted slower than it: the faster
    cut is taken, and `notes` says why."""
    mem_prefix = [0.0, *accumulate(memory)]

    def step(cand):
        return _cut_step(cand, m, schedule, cost, devices)

    def fits(cand):
        return _within_caps(cand, mem_prefix, caps)

    own = step(bounds)
    best, best_step, best_name = list(bounds), own, None
    for name, cand in baselines.items():
        if list(cand) != best and fits(cand) and (cand_step := step(cand)) < best_step * (1 - 1e-9):
            best, best_step, best_name = list(cand), cand_step, name
    if best_name is not None:
        notes.append(f"the {best_name} cuts {best[1:-1]} are taken: the simulated step prices them at "
                     f"{best_step:.2f} ms, the solver's {list(bounds[1:-1])} at {own:.2f} ms (the solver "
                     f"balances the slowest stage; the step also holds the fill, the drain and each transfer)")
    return best


EVERY_CUT_LIMIT = 512
"""Up to this many ways to cut, the planner simulates every one (`shortest_of_all_cuts`)."""


def shortest_of_all_cuts(bounds, m, schedule, cost: StageCost, memory, caps, devices, notes: list[str]) -> list[int]:
    """The cuts of the shortest simulated step among every way to cut the layers into the stages (the
    caller enumerates only where there are at most EVERY_CUT_LIMIT ways: every 2-device plan of up to 513
    layers; beyond, the baselines are compared instead, `no_worse_than_baselines`).

    The solver is exact for the slowest stage; the step shown is the simulator's, which also holds the
    fill, the drain, each transfer and, on CPU stand-ins, each operation's runtime cost and the sends that
    the cores run. Where these outweigh the balance (a small model cut into CPU processes), the balanced
    cut is not the fastest step: with equal speeds a tiny MLP's balanced cut is priced 4.19 ms and a
    lopsided one 3.96, so the balanced cut alone would make slowing one device shorten the plan's step. Enumerating makes the plan
    exact for the step it shows, within the caps; `notes` says when it moves the cuts."""
    layers, stages = len(memory), len(bounds) - 1
    mem_prefix = [0.0, *accumulate(memory)]

    def step(cand):
        return _cut_step(cand, m, schedule, cost, devices)

    own = best_step = step(bounds)
    best = list(bounds)
    for cuts in combinations(range(1, layers), stages - 1):
        cand = [0, *cuts, layers]
        if not _within_caps(cand, mem_prefix, caps):
            continue
        if (cand_step := step(cand)) < best_step * (1 - 1e-9):
            best, best_step = cand, cand_step
    if best != list(bounds):
        notes.append(f"the cuts {best[1:-1]} are taken: of every way to cut, the simulated step is shortest there "
                     f"({best_step:.2f} ms, against {own:.2f} ms at {list(bounds[1:-1])}: the step "
                     "also holds the fill, the drain, each transfer and each operation's runtime cost)")
    return best


def polish_cuts(bounds, m, schedule, cost: StageCost, memory, caps, devices) -> list[int]:
    """Among cuts that keep the optimal slowest stage (and the caps), move cuts one layer at a time while
    the simulated step gets shorter (with several stages per device, any cuts within the caps).

    The solver's objective, the slowest stage, sets the steady-state pace; with few micro-batches the
    fill and drain also count, and several optimal partitions can differ there. This is a tie-break on
    top of the exact optimum, never a trade against it."""
    # One stage per device: keep the solver's optimal slowest stage. Several stages per device (loops or a
    # V): what counts is each device's sum of stages, which the slowest stage does not capture, so the walk
    # may trade stage balance for a shorter simulated step.
    limit = cost.bottleneck(bounds) * (1 + 1e-9) if devices == len(bounds) - 1 else float("inf")
    mem_prefix = [0.0, *accumulate(memory)]
    layers = len(mem_prefix) - 1

    def step(cand):
        return _cut_step(cand, m, schedule, cost, devices)

    def allowed(cand):
        if any(a >= b for a, b in zip(cand, cand[1:])):
            return False
        if cost.bottleneck(cand) > limit:
            return False
        return _within_caps(cand, mem_prefix, caps)

    best, best_step = list(bounds), step(bounds)
    for _ in range(4 * len(bounds) + (layers if limit == float("inf") else 0)):  # one cut moves per round
        moves = [best[:k] + [best[k] + d] + best[k + 1:] for k in range(1, len(best) - 1) for d in (-1, 1)]
        scored = [(step(c), c) for c in moves if allowed(c)]
        if not scored or min(scored)[0] >= best_step * (1 - 1e-9):
            break
        best_step, best = min(scored)
    return best

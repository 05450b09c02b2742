"""make_plan: a Plan for each micro-batch count the profiles measured, and the one to run among them.

Each count's plan is partition/planning/plan.py's `plan_for` (the cut solved, walked on the simulated step, priced);
here the counts a schedule can run are tried, those that do not fit are recorded with the reason, and
the choice goes to the smallest bubble among the plans predicted within the profile's noise of the
fastest (`choose_micro_batches`). Like the rest of the planner it imports no torch.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from pipebench.base.errors import UserError
from pipebench.partition.planning import schedule_order as sched
from pipebench.partition.planning import simulator as sim
from pipebench.partition.planning.plan import Plan, plan_for, shared_cores
from pipebench.partition.profiling.profile_record import Profile
from pipebench.partition.planning.solver import InfeasibleError
from pipebench.request import Request
from pipebench.base.schedules import takes_micro_batches

__all__ = ["make_plan", "plan_ranking", "candidate_steps", "choose_micro_batches", "PROFILE_NOISE"]


def make_plan(profiles: Sequence[Profile], request: Request, *, shared_cores: sim.SharedCores | None = None) -> Plan:
    """Plan `request.virtual_stages` stages per device of `request.devices`, placed as its schedule places
    them (pipebench/request.py says what each field asks).

    profiles: the model profiled at one or more micro-batch sizes (same model and global batch).
    request.micro_batches: use this count (its profile must be among `profiles`); None picks among those
        profiled the count with the highest predicted throughput, ties within the profile's noise going to
        the smaller bubble (choose_micro_batches); fewer than request.min_micro_batches are neither picked
        nor accepted.
    request.max_memory: bytes per device; the plan never exceeds it. With v stages per device each stage
        gets 1/v of its device's cap (a simplification that never overshoots).
    request.links(profile): the link that prices each activation transfer, bytes / bandwidth plus latency.
    request.training.checkpoint: never, always (every stage recomputes its activations), or auto (the cuts
        without recomputing when they fit the caps; else the cuts that fit with recomputing, where each
        stage that fits without it keeps its activations). The recompute is priced in the simulated step.
        Zero-bubble schedules split the backward, which recomputing needs whole: always is refused (by the
        Request), and auto plans them without.
    shared_cores: the devices are CPU processes on one machine's cores (simulator.SharedCores); None: each
        device computes on its own (GPUs).
    """
    if not isinstance(request, Request):  # an AttributeError of check_profiles before
        raise UserError(f"make_plan(profiles, request) takes a pipebench Request, got a {type(request).__name__}")
    profiles = request.check_profiles(profiles)  # at once where the caller checked them for this request
    sched.placement(request.schedule, request.stages, len(request.devices))  # one clear error if it does not fit
    by_count = {p.micro_batches: p for p in profiles}
    counts = _counts_to_try(request, by_count, profiles[0].batch)
    links = request.links(profiles[0])

    def plan_of(m: int, polish: bool = False) -> Plan:
        return plan_for(by_count[m], request, links=links, others=profiles, shared=shared_cores, polish=polish)

    plans, candidates = _plan_each_count(counts, plan_of)
    best = choose_micro_batches(plans)
    if request.balance == "time":
        best = plan_of(best.micro_batches, polish=True)
        candidates = [_candidate(best) if c["micro_batches"] == best.micro_batches else c for c in candidates]
    best.candidates = candidates
    return best


def _counts_to_try(request: Request, by_count: dict[int, Profile], batch: int) -> list[int]:
    """The micro-batch counts to plan: the one the request chose (it must be profiled and not below
    request.min_micro_batches), else every profiled count from that minimum up that torch's class of the
    schedule can run; UserError where there is none."""
    minimum = request.min_micro_batches
    if (chosen := request.chosen) is not None:
        if chosen not in by_count:
            have = ", ".join(str(m) for m in sorted(by_count))
            raise UserError(f"no profile at micro-batch size {batch // chosen} "
                             f"({chosen} micro-batches); profiled counts: {have}")
        if chosen < minimum:
            raise UserError(f"{chosen} micro-batch(es) are too few: this schedule needs at least {minimum}")
        return [chosen]
    counts = [m for m in sorted(by_count) if m >= minimum  # and that torch's schedule can run
              and takes_micro_batches(request.schedule, len(request.devices), m)]
    if not counts:
        raise UserError(f"no profiled micro-batch count reaches the {minimum} this schedule needs "
                         f"(profiled: {', '.join(str(m) for m in sorted(by_count))})")
    return counts


def _plan_each_count(counts: list[int], plan_of: Callable[[int], Plan]) -> tuple[list[Plan], list[dict[str, Any]]]:
    """(the plans that fit, what Plan.candidates records of every count), each count planned by
    `plan_of`; where none fits, the InfeasibleError of the count that needed the least memory, whose
    figure says what caps would make a plan possible."""
    candidates: list[dict[str, Any]] = []
    plans: list[Plan] = []
    first_error: InfeasibleError | None = None
    for m in counts:
        try:
            plan = plan_of(m)
        except InfeasibleError as exc:
            candidates.append({"micro_batches": m, "infeasible": str(exc)})
            if first_error is None or exc.needed < first_error.needed:
                first_error = exc
            continue
        candidates.append(_candidate(plan))
        plans.append(plan)
    if not plans:
        assert first_error is not None
        raise first_error
    return plans, candidates


def plan_ranking(request: Request) -> Callable[[Sequence[Profile]], list[list[tuple]]]:
    """The ranking that partition/profiling/micro_batch_sizes.py's refine asks for, for one plan: rank(profiles) -> one group,
    each micro-batch count make_plan(profiles, request) considered with its predicted step (None where it
    does not fit); no group when nothing fits. The cores' sharing the profiles measured prices CPU
    stand-ins, as pipebench.plan does."""
    def rank(profiles: Sequence[Profile]) -> list[list[tuple]]:
        try:
            plan = make_plan(profiles, request, shared_cores=shared_cores(profiles[0], request.devices))
        except UserError:  # InfeasibleError too: nothing to choose between
            return []
        return [candidate_steps(plan)]

    return rank


def candidate_steps(plan: Plan) -> list[tuple[int, float | None]]:
    """(micro-batch count, predicted step ms or None) of each count the plan's choice considered."""
    return [(c["micro_batches"], c.get("predicted_step_ms")) for c in plan.candidates]


PROFILE_NOISE = 0.03
"""Predicted throughputs closer than this share are a tie: repeated profiles of one model on one GPU
differ by about this much, so ranking within it would pick a micro-batch count at random. Smaller than
the tie between strategies (partition/profiling/micro_batch_sizes.py TIE, the predictions' error): one plan's counts
share one profile and its errors."""


def choose_micro_batches(plans: Sequence[Plan], noise: float = PROFILE_NOISE) -> Plan:
    """The plan to run among one per micro-batch count: of those predicted within `noise` of the fastest,
    the one that idles least (smallest bubble), then the fastest. A smaller bubble is the robust choice: a
    bubble only grows when stages come out slower than profiled, whereas the fastest by a hair is noise.
    (On 2x H200, ResNet-101 pp-1f1b predicted m=2 at 149.9 ms and m=4 at 151.2 ms; m=4 ran 10% faster.)"""
    fastest = max(p.predicted_samples_per_s for p in plans)
    close = [p for p in plans if p.predicted_samples_per_s >= fastest * (1 - noise)]
    return min(close, key=lambda p: (round(p.bubble_fraction, 9), -p.predicted_samples_per_s, p.micro_batches))


def _candidate(plan: Plan) -> dict[str, Any]:
    """What `Plan.candidates` records of one micro-batch count that fits."""
    return {
        "micro_batches": plan.micro_batches,
        "predicted_step_ms": plan.predicted_step_ms,
        "samples_per_s": plan.predicted_samples_per_s,
        "bubble_fraction": plan.bubble_fraction,
        **({"interpolated_from": plan.interpolated_from} if plan.interpolated_from else {}),
    }

"""Predict every strategy from one profile, rank them, and recommend the fastest that fits.

From a saved profile this runs without a GPU (`pipebench advise --profile FILE`). `predict` asks a
strategy's registry entry for its price (bench/strategies/pricing.py and each strategy's package) on the request's devices, caps,
speeds and links, and judges whether it fits; `rank_strategies` ranks the predictions, and a tie (`tie`) goes to
the simpler strategy.

    advice = rank_strategies(profiles, Request(devices=("cuda:0", "cuda:1"), max_memory=(140e9, 140e9)))
    advice.recommended            # "pp-zbv"
    advice.to_dict()              # {"strategies": [...sorted by predicted samples/s...], "recommended": ...}
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing
from pipebench.bench.strategies import BASELINE, STRATEGIES, Strategy, get_strategy, profile_counts, registry_rank
from pipebench.partition.planning import link_costs
from pipebench.partition.profiling import micro_batch_sizes
from pipebench.partition.profiling.profile_record import Profile, step_spread
from pipebench.base.errors import UserError
from pipebench.partition.planning.memory import caps_per_device, over_cap
from pipebench.request import Request, check_recompute

__all__ = ["Prediction", "Advice", "tie", "recommendation_of", "predict", "rank_strategies", "advice_ranking",
           "usable_strategies", "links_of", "top_strategies", "pick_strategies", "advise_counts"]


@dataclass
class Advice:
    predictions: list[Prediction]
    """Fastest predicted first; strategies without a figure last."""
    recommended: str | None
    """The simplest of the strategies that fit and tie (`tie`) with every one predicted faster, single
    unless one is predicted faster than single beyond a tie with it (`recommendation_of`; None when none fits)."""
    tied: dict[str, str] = field(default_factory=dict)
    """The strategies predicted faster than the recommendation but tied with it, fastest first, each with
    why (`tie`)."""

    def baseline(self) -> Prediction | None:
        """The baseline's prediction, what every speed-up is over; None where it has no figure."""
        return next((p for p in self.predictions if p.strategy == BASELINE and p.predicted_samples_per_s), None)

    def to_dict(self) -> dict[str, Any]:
        return {"strategies": [p.to_dict() for p in self.predictions], "recommended": self.recommended,
                "tied": self.tied}


def tie(a: Prediction, b: Prediction) -> str:
    """Why two predictions are a tie ("" where they are not), any of:
    - their own intervals overlap: the profile's noise could swap them (`own_interval_ms`);
    - the slower is predicted within TIE of the faster (partition/profiling/micro_batch_sizes.py);
    - the slower's step lies inside the faster's interval as shown, the machine's drift in it
      (`step_interval_ms`): a step of the faster measured later may land anywhere in that. On a shared 2-vCPU VM
      the same cases measured minutes apart rank one another only to Kendall's tau 0.64-0.69 (bench/
      fidelity.py noise_floor, results/2026-12-02-cpu2-fidelity-fsdp): the drift does not slow the
      strategies alike, so a gap inside it is no order. A gap wider than the drift still decides (pp-zbv
      predicted 1.34x single under a drift of ±19%, measured 1.23x).
    A tie goes to the simpler strategy (the registry's order: single, then the data-parallel ones, then
    the pipelines)."""
    (a_low, a_high), (b_low, b_high) = a.own_interval_ms, b.own_interval_ms
    rates = sorted([a.predicted_samples_per_s, b.predicted_samples_per_s])
    fast, slow = sorted([a, b], key=lambda p: p.predicted_step_ms)
    why = []
    if a_low <= b_high and b_low <= a_high:
        why.append("intervals overlap")
    if rates[0] >= rates[1] * (1 - micro_batch_sizes.TIE):
        why.append(f"within {micro_batch_sizes.TIE:.0%}")
    if slow.predicted_step_ms <= fast.step_interval_ms[1] and not why:
        why.append(f"inside {fast.strategy}'s interval of ±{fast.step_spread:.0%}")
    return " and ".join(why)


def links_of(profile: Profile, request: Request) -> link_costs.Links:
    """The link figures saved with the profile, the request's link where it names one (Request.links, as a
    plan prices its cuts), and on CPU stand-ins what sharing the cores costs. Without a measured all-reduce,
    its bus bandwidth is taken to be the copy bandwidth (a ring of two devices moves the same bytes over the
    same link)."""
    copy, latency = request.links(profile)
    allreduce = profile.allreduce_gbps if profile.allreduce_gbps else copy
    return link_costs.Links(copy_gbps=copy, allreduce_gbps=allreduce, latency_ms=latency,
                            collective_ms=profile.collective_ms, contention=profile.core_contention or 1.0,
                            fsdp_layer_ms=profile.fsdp_layer_ms or 0.0, ddp_ms=profile.ddp_ms or 0.0,
                            ddp_layer_ms=profile.ddp_layer_ms or 0.0, gather_gbps=profile.gather_gbps,
                            scatter_gbps=profile.scatter_gbps)


def predict(strategy: str | Strategy, profiles: Sequence[Profile], request: Request,
            micro_batches: int | None = None) -> Prediction:
    """Predict one strategy on the request's devices (the single baseline takes the first) within its caps
    (bytes per device), at its speeds and links. The precision is the profiles' own (they were timed in
    it); the request's Training gives the optimizer, whose state the memory counts, and the checkpoint mode.

    micro_batches: the count a micro-batched strategy must use (None: the planner's choice).

    Under --checkpoint always a strategy that cannot recompute (its can_checkpoint) has no figure: `run`
    refuses it there (pipebench/request.py check_recompute), so advise must neither call it fitting nor
    recommend it nor put it in the command that checks the recommendation."""
    strategy = get_strategy(strategy) if isinstance(strategy, str) else strategy
    try:
        check_recompute(None, request.training.checkpoint, [strategy])
    except UserError as exc:
        return Prediction(strategy.name, None, None, [], False, micro_batches or 1, strategy.torch_schedule, str(exc))
    devices = request.devices
    used = list(devices[:strategy.devices_used(len(devices))])
    p = len(used)
    caps = caps_per_device(request.max_memory, len(devices))
    caps = caps[:p] if caps else None
    speeds = list(request.speeds[:p]) if request.speeds else None
    links = links_of(profiles[0], request)
    # The profiles' batch is the batch priced (a hybrid's replica prices a share of it): none checked here.
    asked = request.with_(devices=used, batch=None, max_memory=caps, speeds=speeds,
                          micro_batches=micro_batches if strategy.micro_batched else None)
    prediction = strategy.price(Pricing(strategy=strategy, profiles=profiles, request=asked, links=links))
    # The noise of the profile at the micro-batch size it was priced at: a Plan's own, or the replicas'.
    spread = (prediction.plan.step_spread if prediction.plan
              else step_spread(profiles, profiles[0].batch // p, between_runs=True))
    size = prediction.plan.micro_batch_size if prediction.plan else profiles[0].batch // p
    prediction = replace(prediction, step_spread=spread, own_spread=step_spread(profiles, size, drift=False))
    return _judged(prediction, caps)


def _judged(prediction: Prediction, caps: Sequence[float] | None) -> Prediction:
    """`prediction` with `fits` decided here, for every strategy alike (partition/planning/memory.py within_caps):
    a figure whose every device is within its cap. A price function's own view of the cap only chooses how it runs (a replica's
    recompute under --checkpoint auto)."""
    if prediction.predicted_step_ms is None:
        return replace(prediction, fits=False)
    why = over_cap(prediction.peak_memory_bytes, caps)
    if not why:
        return replace(prediction, fits=True)
    reasons = [r for r in prediction.reason.split("; ") if r and not r.startswith("predicted memory exceeds")]
    return replace(prediction, fits=False, reason="; ".join([why, *reasons]))


def rank_strategies(profiles: Sequence[Profile], request: Request, strategies: Sequence[str] | None = None) -> Advice:
    """Predict `strategies` (default: every one that uses all of the request's devices, and the single
    baseline; replicated pipelines from two copies of their stages up)."""
    if strategies is None:
        strategies = usable_strategies(request.devices)
    predictions = [predict(name, profiles, request) for name in strategies]
    predictions.sort(key=lambda p: (p.predicted_samples_per_s is None, -(p.predicted_samples_per_s or 0.0)))
    fitting = [p for p in predictions if p.fits and p.predicted_samples_per_s]
    if not fitting:
        return Advice(predictions, None)
    pick = recommendation_of(fitting)
    return Advice(predictions, pick.strategy, {p.strategy: tie(p, pick) for p in fitting[:fitting.index(pick)]})


def recommendation_of(fitting: Sequence[Prediction]) -> Prediction:
    """Of predictions that fit, fastest first: the simplest strategy (the registry's order) among those
    that tie with every one predicted faster, and of those, where single fits, only single and the ones
    predicted faster than single beyond a tie with it. A tie is not transitive: with a shared 2-vCPU VM's ±36%
    intervals pp-1f1b ties with pp-zb (1.42x single) and with single (1.08x); recommending it would claim
    a gain over single that the prediction cannot tell from noise, so pp-zb is recommended there, and
    where nothing clears single, single."""
    close = [p for i, p in enumerate(fitting) if all(tie(p, faster) for faster in fitting[:i])]
    single = next((p for p in fitting if p.strategy == BASELINE), None)
    if single is not None:
        close = [p for p in close if p is single or not tie(p, single)] or [single]
    return min(close, key=lambda p: registry_rank(p.strategy))


def usable_strategies(devices: Sequence[str]) -> list[str]:
    """Every strategy that uses all of `devices`, and the single baseline; replicated pipelines from two
    copies of their stages up. On one device that is every other one too (a multi-process strategy runs
    as a group of one): what each costs there beside single is what a user of one GPU asks."""
    return [name for name, s in STRATEGIES.items() if not s.replicated or len(devices) >= 2 * s.stages_per_replica]


def advise_counts(devices: Sequence[str], micro_batches) -> list[int] | None:
    """The micro-batch counts advise profiles: what every strategy usable on `devices` needs (the registry's
    profile_counts; also where the caller ranks only some of them), with the pipelines' counts asked for (`micro_batches`: a count, counts, or None for
    auto: every count a pipeline might choose). On one device nothing micro-batches (a one-stage pipeline is
    single), so the whole batch is all."""
    given = micro_batches if isinstance(micro_batches, (tuple, list)) else (micro_batches,)
    strategies = usable_strategies(devices) if len(devices) > 1 else [BASELINE]
    return profile_counts(given, len(devices), strategies=strategies)


def advice_ranking(request: Request, strategies: Sequence[str] | None = None):
    """The ranking that partition/profiling/micro_batch_sizes.py's refine asks for, for rank_strategies(profiles, request): one group per
    pipeline, the micro-batch counts its planner considered, and one group of every strategy's prediction,
    each pipeline's at its chosen count, a replica strategy's at its replicas' share. strategies: those of
    them to rank (None: every usable one)."""
    from pipebench.partition.planning.plan_choice import candidate_steps

    devices = request.devices
    usable = usable_strategies(devices)
    chosen = usable if strategies is None else [s for s in strategies if s in usable]
    request = request.with_(micro_batches=None)  # each count profiled is the strategies' to choose

    def rank(profiles: Sequence[Profile]) -> list[list[tuple]]:
        predictions = rank_strategies(profiles, request, strategies=chosen).predictions
        plans = [p.plan for p in predictions if p.plan is not None]
        every = [(p.plan.micro_batches if p.plan is not None else get_strategy(p.strategy).devices_used(len(devices)),
                  p.predicted_step_ms) for p in predictions]
        return [*(candidate_steps(plan) for plan in plans), every]

    return rank


def pick_strategies(profiles: Sequence[Profile], request: Request, top: int | None = None) -> tuple[Advice, list[str]]:
    """What auto runs or trains from a model's profile, for `run --strategies auto:K` and `train --strategy
    auto` alike: every usable strategy ranked (`rank_strategies`) and, with `top`, the single baseline and
    the `top` fastest that fit (`top_strategies`); without it, the recommendation alone ([] where none fits)."""
    advice = rank_strategies(profiles, request)
    if top is not None:
        return advice, top_strategies(advice, top)
    return advice, [advice.recommended] if advice.recommended else []


def top_strategies(advice: Advice, k: int) -> list[str]:
    """`run --strategies auto:K`: the single baseline plus the K fastest predicted strategies that fit."""
    ranked = [p.strategy for p in advice.predictions if p.fits and p.predicted_samples_per_s and p.strategy != BASELINE]
    return [BASELINE, *ranked[:k]]



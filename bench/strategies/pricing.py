"""What the strategies' prices share: the `Pricing` each is asked, and the replicas' common price.

A price is the function a registry entry holds (`Strategy.price`): it predicts the strategy's step and
its memory per device from the profiles, without running it. Each takes one `Pricing`, the frozen value
of what it is asked (the strategy, the profiles, the Request narrowed to the devices the strategy uses,
and the links priced from both), and returns a `Prediction`. bench/predict/ranking.py builds the
Pricing (`predict`) and ranks what the prices say.

- the strategies that follow a Plan (single, modelparallel, pipeline, every pp-* schedule) share the
  package planned/: its `price_plan` (planned/price.py) is the planner (exact solver, schedule simulator,
  micro-batch choice);
- the others each have a package of their own, their price in its `price.py` (their cost model, where
  they have one of their own, in its `cost.py`) and their Trainer in its `trainer.py`: ddp/, zero1/,
  dataparallel/, fsdp/, devicemap/ and hybrid/. The replicas among them (ddp, zero1, fsdp, dataparallel) give `price_replicas` their cost model; it opens
  with `Pricing.replicas` and judges the recompute, the speeds and the caps alike for all of them, and
  `replica_memory` is what one whole replica holds (DDP, ZeRO-1, nn.DataParallel).

No torch: a Trainer's module imports it, and the registry (with these prices) is imported by the
report, the results store and a cached `pipebench advise`, none of which may load torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from pipebench.bench.strategies.prediction import Prediction
from pipebench.partition.planning.link_costs import Links
from pipebench.partition.planning.memory import caps_per_device, unmodelled_bytes, within_caps
from pipebench.partition.profiling.profile_record import LayerProfile, Profile, calibration, kept_bytes
from pipebench.request import Request, split_error
from pipebench.base.training import Training

__all__ = ["Pricing", "one_cpu_process", "Replicas", "price_replicas", "replica_memory"]


@dataclass(frozen=True)
class Pricing:
    """What one price is asked: this strategy, on these devices, from these profiles; every price takes
    it whole (`price(pricing) -> Prediction`).

    Why one value, holding the Request: a price reads what it needs (the devices, caps, speeds,
    Training and micro-batch count are the request's, checked once where it was built); price_plan
    hands the request on to the planner with only the strategy's schedule added; the hybrid says what
    it changes (`dataclasses.replace` of the request: one replica's devices, caps and speeds); and what
    the replica prices all open with (`replicas`, then `price_replicas`) is here once. Frozen, its
    profiles a tuple: a price cannot change what the next one is asked."""

    strategy: Strategy
    """The registry entry priced (bench/strategies/__init__.py `Strategy`; named, not imported: the
    registry imports this module)."""
    profiles: tuple[Profile, ...]
    """The model profiled at one or more micro-batch counts (one model, one global batch)."""
    request: Request
    """What was asked, narrowed to the devices the strategy uses (the single baseline: the first), their
    caps and speeds, with the micro-batch count a micro-batched strategy must use (None: the planner's
    choice; always None for the others)."""
    links: Links
    """The links between the devices (partition/planning/link_costs.py), and what sharing CPU cores costs."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", tuple(self.profiles))

    @property
    def devices(self) -> tuple[str, ...]:
        return self.request.devices

    @property
    def caps(self) -> tuple[float, ...] | None:
        """Memory cap per device used, in bytes; None: no cap."""
        caps = caps_per_device(self.request.max_memory, len(self.devices))
        return tuple(caps) if caps else None

    @property
    def speeds(self) -> tuple[float, ...] | None:
        """Speed per device used, relative to the profiled one; None: all alike."""
        return self.request.speeds

    @property
    def training(self) -> Training:
        """Its optimizer (whose states the memory counts) and checkpoint mode; the precision is the profiles'."""
        return self.request.training

    @property
    def micro_batches(self) -> int | None:
        return self.request.chosen

    @property
    def batch(self) -> int:
        """The global batch, the profiles' own."""
        return self.profiles[0].batch

    @property
    def calibration(self) -> float:
        """The profiles' measured whole step over their segments' sum (partition/profiling/profile_record.py calibration):
        the scale of the replicas' cost models."""
        return calibration(list(self.profiles))

    def no_figure(self, why: str, *, micro_batches: int = 1, schedule: str | None = None,
                  memory: list[int] | None = None) -> Prediction:
        """The Prediction of a strategy that has no figure here, and `why`."""
        return Prediction(self.strategy.name, None, None, memory or [], False, micro_batches, schedule, why)

    def replicas(self) -> Replicas | Prediction:
        """The strategy as p whole-model replicas on these p devices; or the Prediction that says why it
        has no figure (a batch that does not split, no profile at the replicas' micro-batch)."""
        p, batch = len(self.devices), self.batch
        by_count = {pr.micro_batches: pr for pr in self.profiles}
        if (why := split_error(batch, p, self.strategy.name)) is not None:
            return self.no_figure(why)
        if p not in by_count:
            return self.no_figure(f"no profile at the replicas' micro-batch of {batch // p} samples "
                                  f"(profiled: {', '.join(str(batch // m) for m in sorted(by_count))})")
        return Replicas(p, by_count, by_count[p].layers, unmodelled_bytes(self.profiles, by_count[p].micro_batch))


def one_cpu_process(strategy, devices: Sequence[str]) -> bool:
    """A strategy that drives several CPU stand-ins for devices from one process runs them in turn: a CPU
    op returns when done, so nothing overlaps as it does on GPUs (and DataParallel runs the module as is)."""
    return len(devices) > 1 and not strategy.process_per_device and devices[0].startswith("cpu")


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


@dataclass(frozen=True)
class Replicas:
    """What a strategy of p whole-model replicas, each on batch / p samples, is priced from."""
    p: int
    by_count: dict[int, Profile]  # every profile, by micro-batch count
    layers: list  # the profile's layers at the replicas' micro-batch
    unmodelled: int  # memory per device that the layers do not model (partition/planning/memory.py)

    @property
    def profile(self) -> Profile:
        return self.by_count[self.p]


def price_replicas(pricing: Pricing, cost: Callable[[Replicas, bool], tuple[float, list[int]]]) -> Prediction:
    """A replica strategy's figure from its cost model, `cost(replicas, recompute) -> (step ms, memory per
    device)`, on `pricing.replicas()` (or the Prediction that says why there are none): the slowest
    replica sets the pace; it fits when every device's memory is within its cap. checkpoint always
    recomputes every layer; auto only when the replica would not fit otherwise and fits with it."""
    replicas = pricing.replicas()
    if isinstance(replicas, Prediction):
        return replicas

    def fitting(memory):
        return within_caps(memory, pricing.caps)

    checkpoint = pricing.training.checkpoint
    recompute = checkpoint == "always"
    step, memory = cost(replicas, recompute)
    if checkpoint == "auto" and not fitting(memory):
        recomputed = cost(replicas, True)
        if fitting(recomputed[1]):
            (step, memory), recompute = recomputed, True
    if pricing.speeds:
        step /= min(pricing.speeds)
    return Prediction.of_step(pricing.strategy.name, step, pricing.batch, memory=memory, fits=fitting(memory),
                              recompute=recompute)

"""What the strategies' prices share, and the price of every strategy that follows a Plan.

A price is the function a registry entry holds (`Strategy.price`): it predicts the strategy's step and
its memory per device from the profiles, without running it. Each takes (strategy, profiles, devices,
caps, speeds, links, training, micro_batches): the devices the strategy uses, their caps and speeds, the
links (partition/costs.py `Links`), the Training, and the count a micro-batched strategy must use (None:
the planner's choice; always None for the others). bench/predict/ranking.py calls them (`predict`) and ranks what
they say.

- the strategies that follow a Plan (single, modelparallel, pipeline, every pp-* schedule): `price_plan`,
  the planner with its exact solver, schedule simulator and micro-batch choice (partition/plan_choice.py);
- the others each have a package of their own, their price (with their cost model) in its `__init__.py`
  and their Trainer in its `trainer.py`: ddp/, zero1/, dataparallel/, fsdp/, devicemap/ and hybrid/. The
  replicas among them build on `replicas_of` and `replica_prediction` here.

No torch: a Trainer's module imports it, and the registry (with these prices) is imported by the
report, the results store and a cached `pipebench advise`, none of which may load torch.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from pipebench.bench.strategies.prediction import Prediction
from pipebench.errors import UserError
from pipebench.partition.memory import unmodelled_bytes
from pipebench.partition.plan import shared_cores
from pipebench.partition.plan_choice import make_plan
from pipebench.partition.profile import Profile
from pipebench.partition.solver import InfeasibleError
from pipebench.request import Request, split_error, within_caps
from pipebench.training import Training

__all__ = ["price_plan", "one_cpu_process", "Replicas", "replicas_of", "replica_prediction"]


def price_plan(strategy, profiles, devices, caps, speeds, links, training, micro_batches) -> Prediction:
    """A strategy that follows a Plan: the planner's prediction on its schedule."""
    try:
        request = Request(devices=tuple(devices), schedule=strategy.schedule.name,
                          virtual_stages=strategy.stages_per_device,
                          micro_batches=micro_batches if strategy.micro_batched else 1, max_memory=caps,
                          speeds=speeds, link_gbps=links.copy_gbps if len(devices) > 1 else 0.0,
                          link_latency_ms=links.latency_ms, min_micro_batches=strategy.min_micro_batches(len(devices)),
                          training=training if strategy.can_checkpoint else replace(training, checkpoint="never"))
        plan = make_plan(profiles, request,
                         shared_cores=shared_cores(profiles[0], devices) if strategy.process_per_device else None)
    except InfeasibleError as exc:
        return Prediction(strategy.name, None, None, [int(exc.needed)] * len(devices), False,
                          micro_batches or 1, strategy.torch_schedule or strategy.schedule.name, str(exc).splitlines()[0])
    except UserError as exc:
        return Prediction(strategy.name, None, None, [], False, micro_batches or 1,
                          strategy.torch_schedule or strategy.schedule.name, str(exc).splitlines()[0])
    step = plan.predicted_step_ms
    if one_cpu_process(strategy, devices):  # nothing overlaps: the stages take turns on one process's threads
        step = plan.micro_batches * sum(s.forward_ms + s.backward_ms for s in plan.stages)
    return Prediction(strategy.name, step, plan.batch / step * 1e3 if step > 0 else None, plan.memory_per_device(),
                      True, plan.micro_batches, strategy.torch_schedule or strategy.schedule.name, plan=plan)


def one_cpu_process(strategy, devices: Sequence[str]) -> bool:
    """A strategy that drives several CPU stand-ins for devices from one process runs them in turn: a CPU
    op returns when done, so nothing overlaps as it does on GPUs (and DataParallel runs the module as is)."""
    return len(devices) > 1 and not strategy.process_per_device and devices[0].startswith("cpu")


@dataclass(frozen=True)
class Replicas:
    """What a strategy of p whole-model replicas, each on batch / p samples, is priced from."""
    p: int
    by_count: dict[int, Profile]  # every profile, by micro-batch count
    layers: list  # the profile's layers at the replicas' micro-batch
    unmodelled: int  # memory per device that the layers do not model (partition/memory.py)

    @property
    def profile(self) -> Profile:
        return self.by_count[self.p]


def replicas_of(strategy, profiles, devices: Sequence[str]) -> Replicas | Prediction:
    """The Replicas of a strategy on these devices; or the Prediction that says why it has no figure (a
    batch that does not split, no profile at the replicas' micro-batch)."""
    p = len(devices)
    batch = profiles[0].batch
    by_count = {pr.micro_batches: pr for pr in profiles}
    if (why := split_error(batch, p, strategy.name)) is not None:
        return Prediction(strategy.name, None, None, [], False, 1, None, why)
    if p not in by_count:
        return Prediction(strategy.name, None, None, [], False, 1, None,
                          f"no profile at the replicas' micro-batch of {batch // p} samples "
                          f"(profiled: {', '.join(str(batch // m) for m in sorted(by_count))})")
    return Replicas(p, by_count, by_count[p].layers, unmodelled_bytes(profiles, by_count[p].micro_batch))


def replica_prediction(strategy, price: Callable[[bool], tuple[float, list[int]]], batch: int, caps, speeds,
                        training: Training) -> Prediction:
    """A replica strategy's figure from `price(recompute) -> (step ms, memory per device)`: the slowest
    replica sets the pace; it fits when every device's memory is within its cap. checkpoint always
    recomputes every layer; auto only when the replica would not fit otherwise and fits with it."""
    def fitting(memory):
        return within_caps(memory, caps)

    recompute = training.checkpoint == "always"
    step, memory = price(recompute)
    if training.checkpoint == "auto" and not fitting(memory):
        recomputed = price(True)
        if fitting(recomputed[1]):
            (step, memory), recompute = recomputed, True
    if speeds:
        step /= min(speeds)
    return Prediction(strategy.name, step, batch / step * 1e3 if step > 0 else None, memory, fitting(memory), 1,
                      None, recompute=recompute)

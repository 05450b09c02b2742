"""The one price of the strategies that follow a Plan: the planner's (`price_plan`).

No torch here: the registry imports this price where torch must not load.
"""
from __future__ import annotations

from dataclasses import replace

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing, one_cpu_process
from pipebench.base.errors import UserError
from pipebench.partition.planning.plan import shared_cores
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.planning.solver import InfeasibleError

__all__ = ["price_plan"]


def price_plan(pricing: Pricing) -> Prediction:
    """A strategy that follows a Plan: the planner's prediction on its schedule."""
    strategy, devices, micro_batches = pricing.strategy, pricing.devices, pricing.micro_batches
    schedule = strategy.torch_schedule or strategy.schedule.name
    try:  # the request as asked, on the strategy's schedule, cut where the profiled times balance
        request = pricing.request.with_(
            schedule=strategy.schedule.name, virtual_stages=strategy.stages_per_device, balance="time",
            micro_batches=micro_batches if strategy.micro_batched else 1,
            min_micro_batches=strategy.min_micro_batches(len(devices)),
            link_gbps=pricing.links.copy_gbps if len(devices) > 1 else 0.0, link_latency_ms=pricing.links.latency_ms,
            training=pricing.training if strategy.can_checkpoint else replace(pricing.training, checkpoint="never"))
        plan = make_plan(pricing.profiles, request,
                         shared_cores=shared_cores(pricing.profiles[0], devices) if strategy.process_per_device
                         else None)
    except InfeasibleError as exc:
        return pricing.no_figure(str(exc).splitlines()[0], micro_batches=micro_batches or 1, schedule=schedule,
                                 memory=[int(exc.needed)] * len(devices))
    except UserError as exc:
        return pricing.no_figure(str(exc).splitlines()[0], micro_batches=micro_batches or 1, schedule=schedule)
    step = plan.predicted_step_ms
    if one_cpu_process(strategy, devices):  # nothing overlaps: the stages take turns on one process's threads
        step = plan.micro_batches * sum(s.forward_ms + s.backward_ms for s in plan.stages)
    return Prediction.of_step(strategy.name, step, plan.batch, memory=plan.memory_per_device(), fits=True,
                              micro_batches=plan.micro_batches, schedule=schedule, plan=plan)

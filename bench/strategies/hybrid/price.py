"""The hybrid's price (no torch): one replica's Plan (bench/strategies/planned/price.py price_plan) plus each
stage's gradient all-reduce (partition/planning/link_costs.py allreduce_ms)."""
from __future__ import annotations

from dataclasses import replace

from pipebench.base.step_stats import samples_per_s
from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.planned.price import price_plan
from pipebench.bench.strategies.pricing import Pricing
from pipebench.partition.planning import link_costs
from pipebench.bench.strategies.hybrid.copies import copies_error
from pipebench.request import split_error

__all__ = ["price_hybrid"]

def price_hybrid(pricing: Pricing) -> Prediction:
    """hybrid: copies of one pipeline over `stages_per_replica` devices, each training on batch / replicas
    samples. The Plan is planned for one replica (on the profiles as one replica's batch sees them) and
    its step is the Plan's plus each stage's DDP all-reduce of its gradients over the replicas (after
    the schedule, not overlapped; the stages' all-reduces run at once, the slowest ends the step). The
    slowest copy of each stage sets its speed; the tightest cap its memory."""
    strategy, devices, caps, speeds = pricing.strategy, pricing.devices, pricing.caps, pricing.speeds
    k, p, batch = strategy.stages_per_replica, len(devices), pricing.batch
    unavailable = lambda why: pricing.no_figure(why, micro_batches=pricing.micro_batches or 1,  # noqa: E731
                                                schedule=strategy.torch_schedule)
    if (why := copies_error(p, k)) is not None:
        return unavailable(why)
    replicas = strategy.replicas(p)
    if (why := split_error(batch, replicas, strategy.name)) is not None:
        return unavailable(why)
    share = [replace(pr, batch=batch // replicas) for pr in pricing.profiles if (batch // replicas) % pr.micro_batch == 0]
    if not share:
        return unavailable(f"no profile at a micro-batch that splits a replica's {batch // replicas} samples")
    per_stage = lambda values, pick: [pick(values[r * k + s] for r in range(replicas)) for s in range(k)]  # noqa: E731
    one = price_plan(replace(pricing, profiles=share, request=pricing.request.with_(
        devices=devices[:k], max_memory=per_stage(caps, min) if caps else None,
        speeds=per_stage(speeds, min) if speeds else None)))
    if one.plan is None:
        return replace(one, peak_memory_bytes=one.peak_memory_bytes * replicas)
    layers = share[0].layers
    allreduce = max(link_costs.allreduce_ms(sum(l.param_bytes for l in layers[s.first_layer:s.end_layer]), replicas,
                                            pricing.links)
                    for s in one.plan.stages)
    step = one.predicted_step_ms + allreduce
    return replace(one, predicted_step_ms=step, predicted_samples_per_s=samples_per_s(batch, step),
                   peak_memory_bytes=one.peak_memory_bytes * replicas)

"""When no pipeline pays: the one line that `plan` and `advise` print, with the reason, from the numbers the
plan already has.

A pipeline of p devices is faster than single when p devices, each busy part of the step, beat one device
busy all of it. Its step spends the devices' time (p x step) on four things, and single's step on one:
- the stages' work: m micro-batches of every stage's forward and backward. Beyond single's step that is the
  per-micro-batch cost (a micro-batch of fewer samples costs more per sample; on CPU stand-ins each
  operation also pays the pipeline runtime), and so is the runtime's share of the busy time;
- the transfers: each cut's activation forth and its gradient back, per micro-batch;
- idling behind the slowest device in the steady state (a stage that cannot be balanced);
- the rest of the idle time: the bubble while the pipeline fills and drains.
The largest of these, in device-ms, is the reason given. A split where one device does almost nothing
(DEGENERATE) is single with a hop, whatever its figures: it is said so too.

    line = no_pipeline_pays(best_pipeline, single)   # "" where it pays
"""
from __future__ import annotations

from pipebench.bench.predict.ranking import Prediction, tie
from pipebench.partition.planning.plan import Plan, transfer_ms

__all__ = ["DEGENERATE", "no_pipeline_pays", "plan_verdict", "costs_of"]

DEGENERATE = 0.05
"""A device doing less than this share of the stages' work leaves a split that is single with a hop (resnet101
tiny on 2 CPU stages: layers 0-37 on one, `flatten .. fc`, 0.3% of the work, on the other)."""


def costs_of(plan: Plan, single_ms: float) -> dict[str, float]:
    """What the plan's step spends beyond single's, in device-ms (module docstring): per-micro-batch cost,
    transfers, imbalance and bubble. They add up to p x step - single's step, up to the simulator's overlap
    of transfers with compute (a GPU's sends run beside it)."""
    m, p = plan.micro_batches, plan.device_count
    per_device = [sum(s.forward_ms + s.backward_ms for s in stages) for stages in _stages_by_device(plan)]
    work = m * sum(per_device)
    hops = [transfer_ms(s.activation_out_bytes, plan.link_gbps, plan.link_latency_ms)
            for s, a, b in zip(plan.stages, plan.placement, plan.placement[1:]) if a != b]
    transfers = 2 * m * sum(hops)
    busy = (1 - plan.bubble_fraction) * p * plan.predicted_step_ms
    idle = plan.bubble_fraction * p * plan.predicted_step_ms
    imbalance = min(m * sum(max(per_device) - d for d in per_device), idle)
    runtime = max(busy - work - (transfers if plan.cores_shared else 0.0), 0.0)  # CPU stand-ins' runtime costs
    return {"per-micro-batch": max(work - single_ms, 0.0) + runtime, "transfers": transfers,
            "imbalance": imbalance, "bubble": idle - imbalance, "work": work, "runtime": runtime, "single": single_ms,
            "smallest share": min(per_device) / sum(per_device) if sum(per_device) > 0 else 1.0}


def no_pipeline_pays(pipeline: Prediction, single: Prediction | None, subject: str | None = None) -> str:
    """One line where the best pipeline is predicted no faster than single (slower, or a tie: advise's
    `tie`, within the interval), or its split is degenerate (DEGENERATE); "" where it pays, and where there
    is nothing to compare (single has no figure or does not fit: then the pipeline is what fits).
    subject: what the line calls the pipeline (default "the best, NAME")."""
    plan = pipeline.plan
    if (plan is None or plan.device_count < 2 or pipeline.predicted_step_ms is None or single is None
            or single.predicted_step_ms is None or not single.fits):
        return ""
    step, alone = pipeline.predicted_step_ms, single.predicted_step_ms
    costs = costs_of(plan, alone)
    degenerate = costs["smallest share"] < DEGENERATE
    tied = tie(pipeline, single) if step < alone else ""
    if step < alone and not tied and not degenerate:
        return ""
    verdict = (f"{alone / step:.2f}x single, a tie ({tied})" if tied
               else f"{alone / step:.2f}x single ({step:.2f} ms against {alone:.2f})")
    subject = subject or f"the best, {pipeline.strategy},"
    in_turn = step > plan.predicted_step_ms * (1 + 1e-9) and not degenerate
    return f"no pipeline pays here: {subject} is predicted {verdict}; {_reason(plan, costs, in_turn)}"


def plan_verdict(plan: Plan, profiles, request) -> str:
    """`pipebench plan`'s line: the plan against single priced from the same profiles and request (advise's
    `predict`); "" where the plan pays or single has no figure (the whole batch was not profiled)."""
    from pipebench.bench.predict.ranking import predict
    from pipebench.bench.strategies import BASELINE
    from pipebench.partition.profiling.profile_record import step_spread

    mine = Prediction("this plan", plan.predicted_step_ms, plan.predicted_samples_per_s, plan.memory_per_device(),
                      True, plan.micro_batches, plan.schedule, plan=plan, step_spread=plan.step_spread,
                      own_spread=step_spread(profiles, plan.micro_batch_size, drift=False))
    return no_pipeline_pays(mine, predict(BASELINE, profiles, request), subject="this plan")



def _stages_by_device(plan: Plan) -> list[list]:
    """Each device's stages, in the plan's placement (an interleaved schedule puts several on one)."""
    return [[s for s, d in zip(plan.stages, plan.placement) if d == device] for device in range(plan.device_count)]

def _reason(plan: Plan, costs: dict[str, float], in_turn: bool = False) -> str:
    """The largest of the costs, said with its numbers; in_turn: the strategy runs the stages in turn in one
    process (CPU stand-ins: nothing overlaps), which is the reason then."""
    m, size = plan.micro_batches, plan.micro_batch_size
    if in_turn:
        return "one process runs its stages in turn on the CPU, so nothing overlaps"
    if costs["smallest share"] < DEGENERATE:
        per_device = _stages_by_device(plan)
        device = min(range(plan.device_count), key=lambda d: sum(s.forward_ms + s.backward_ms for s in per_device[d]))
        names = ", ".join(s.layers[0] if len(s.layers) == 1 else f"{s.layers[0]} .. {s.layers[-1]}" for s in per_device[device])
        return (f"a stage that cannot be balanced: device {device} ({names}) does {costs['smallest share']:.1%} of the "
                f"work; every cut that shares it out is predicted slower")
    reason = max(("per-micro-batch", "transfers", "imbalance", "bubble"), key=lambda k: costs[k])
    step = plan.predicted_step_ms
    if reason == "per-micro-batch":
        runtime = f", and {costs['runtime']:.2f} ms of the pipeline runtime's cost per operation" if costs["runtime"] else ""
        return (f"the per-micro-batch cost: {m} micro-batch(es) of {size} take {costs['work']:.2f} ms of stage "
                f"work{runtime}, against single's whole step of {costs['single']:.2f} ms")
    if reason == "transfers":
        return (f"the transfers: {costs['transfers']:.2f} ms a step of activations and gradients between the stages "
                f"({plan.link_gbps:g} GB/s), {costs['transfers'] / (plan.device_count * step):.0%} of the devices' time")
    if reason == "imbalance":
        return (f"a stage that cannot be balanced: the slowest does {plan.balance_ratio:.2f}x the mean, and the "
                f"others wait {costs['imbalance']:.2f} ms a step for it")
    slower = [c for c in plan.candidates if c.get("micro_batches", 0) > m and "samples_per_s" in c]
    more = (f"; more micro-batches are predicted slower ({slower[0]['micro_batches']}: {slower[0]['samples_per_s']:.1f} "
            f"samples/s against {plan.predicted_samples_per_s:.1f})"
            if slower and slower[0]["samples_per_s"] < plan.predicted_samples_per_s else "")
    return (f"the bubble: with {m} micro-batch(es) the devices idle {plan.bubble_fraction:.0%} of the step while "
            f"the pipeline fills and drains{more}")

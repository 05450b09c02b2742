"""Each strategy's price: the function its registry entry holds (`Strategy.price`), which predicts its
step and its memory per device from the profiles, without running it.

- the strategies that follow a Plan (single, modelparallel, pipeline, every pp-* schedule): `price_plan`,
  the planner with its exact solver, schedule simulator and micro-batch choice (partition/plan.py);
- the replicas (ddp, zero1, dataparallel, fsdp): partition/costs.py's cost models, from the profile at
  the replica's micro-batch (batch / p), through `replica_profiles` and `replica_prediction`;
- device-map: a one-micro-batch Plan at accelerate's own cuts (which builds the model and imports torch
  and accelerate to read its sizes, unless the profile cache kept them);
- hybrid: one replica's Plan plus its gradient all-reduce.

They live beside the Trainers, not in them: a Trainer's module imports torch, and the registry (with
these prices) is imported by the report, the results store and a cached `pipebench advise`, none of which
may load torch. bench/advise.py calls them (`predict`) and ranks what they say.

Each takes (strategy, profiles, devices, caps, speeds, links, training, micro_batches): the devices the
strategy uses, their caps and speeds, the links (partition/costs.py `Links`), the Training, and the count a
micro-batched strategy must use (None: the planner's choice; always None for the others).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from pipebench.bench.prediction import Prediction
from pipebench.errors import UserError
from pipebench.partition import costs
from pipebench.partition.cuts import transfer_ms
from pipebench.partition.memory import recomputing, unmodelled_bytes
from pipebench.partition.plan import plan_with_bounds, shared_cores
from pipebench.partition.plan_choice import make_plan
from pipebench.partition.profile import Profile, calibration
from pipebench.partition.schedule import IN_TURN
from pipebench.partition.solver import InfeasibleError
from pipebench.request import Request, split_error, within_caps
from pipebench.training import Training

__all__ = ["price_plan", "price_ddp", "price_zero1", "price_dataparallel", "price_fsdp", "price_device_map",
           "price_hybrid", "replica_profiles", "replica_prediction", "device_map_cuts", "one_cpu_process"]

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


def replica_profiles(strategy, profiles, p: int) -> dict[int, Profile] | Prediction:
    """The profiles by micro-batch count, for a strategy of p replicas each on batch / p samples; or the
    Prediction that says why it has no figure (a batch that does not split, no profile at the replicas'
    micro-batch)."""
    batch = profiles[0].batch
    by_count = {pr.micro_batches: pr for pr in profiles}
    if (why := split_error(batch, p, strategy.name)) is not None:
        return Prediction(strategy.name, None, None, [], False, 1, None, why)
    if p not in by_count:
        return Prediction(strategy.name, None, None, [], False, 1, None,
                          f"no profile at the replicas' micro-batch of {batch // p} samples "
                          f"(profiled: {', '.join(str(batch // m) for m in sorted(by_count))})")
    return by_count


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


def price_ddp(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """DDP: every device runs the whole model on batch / p samples, its gradients all-reduced in buckets
    during the backward (partition/costs.py ddp_step)."""
    p = len(devices)
    by_count = replica_profiles(strategy, profiles, p)
    if isinstance(by_count, Prediction):
        return by_count
    layers = by_count[p].layers
    states = 2 + training.states
    unmodelled = unmodelled_bytes(profiles, by_count[p].micro_batch)

    def price(recompute: bool):  # recompute: every layer's forward runs again in the backward
        priced = [recomputing(l) for l in layers] if recompute else layers
        return (costs.ddp_step(priced, p, links, scale=calibration(list(profiles))),
                [costs.replica_memory(layers, states, extra_param_copies=1 if p > 1 else 0,
                                      recompute=recompute) + unmodelled] * p)
    return replica_prediction(strategy, price, profiles[0].batch, caps, speeds, training)


def price_zero1(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """ZeRO-1 (bench/strategies/zero1.py): DDP's step (partition/costs.py ddp_step) plus the broadcast of the
    updated shards after it, which moves what an all-gather of the parameters does (costs.gather_ms); DDP's
    memory with the optimizer's states divided over the p replicas."""
    p = len(devices)
    by_count = replica_profiles(strategy, profiles, p)
    if isinstance(by_count, Prediction):
        return by_count
    layers = by_count[p].layers
    params = sum(l.param_bytes for l in layers)
    states = -(-params * training.states // p)  # this replica's share of the optimizer's states
    unmodelled = unmodelled_bytes(profiles, by_count[p].micro_batch)

    def step(recompute: bool):  # recompute: every layer's forward runs again in the backward
        priced = [recomputing(l) for l in layers] if recompute else layers
        return (costs.ddp_step(priced, p, links, scale=calibration(list(profiles))) + costs.gather_ms(params, p, links),
                [costs.replica_memory(layers, 2, extra_param_copies=1 if p > 1 else 0, recompute=recompute)
                 + states + unmodelled] * p)
    return replica_prediction(strategy, step, profiles[0].batch, caps, speeds, training)


def price_dataparallel(strategy, profiles, devices, caps, speeds, links, training,
                       micro_batches=None) -> Prediction:
    """nn.DataParallel: one process copies the model to every device each step, scatters the batch and
    gathers the outputs (partition/costs.py dataparallel_step); it cannot recompute (its replicas'
    threads). On CPU stand-ins it runs the module as it is, on the whole batch, in one process: the
    profile's whole step timed at the whole batch (the calibrated layers' sum where it was not timed)."""
    p = len(devices)
    batch = profiles[0].batch
    by_count = replica_profiles(strategy, profiles, p)
    if isinstance(by_count, Prediction):
        return by_count
    layers = by_count[p].layers
    states = 2 + training.states
    if one_cpu_process(strategy, devices):
        whole = by_count.get(1)
        if whole is None:
            return Prediction(strategy.name, None, None, [], False, 1, None, "no profile of the whole batch")
        # The module as it is, on the whole batch, in one process: the whole step the profile timed so.
        step = whole.whole_step_ms or calibration(list(profiles)) * sum(l.step_ms for l in whole.layers)
        return Prediction(strategy.name, step, batch / step * 1e3 if step > 0 else None,
                          [costs.replica_memory(whole.layers, states)], True, 1, None)

    unmodelled = unmodelled_bytes(profiles, by_count[p].micro_batch)

    def price(recompute: bool):
        return (costs.dataparallel_step(layers, p, links, scale=calibration(list(profiles)),
                                        output_bytes=layers[-1].output_bytes),
                [costs.replica_memory(layers, states) + unmodelled] +
                [costs.replica_memory(layers, 2) + unmodelled] * (p - 1))
    return replica_prediction(strategy, price, batch, caps, speeds, training)


def price_fsdp(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """FSDP2: every device runs the whole model on batch / p samples, as DDP, with 1/p of the parameters,
    gradients and optimizer states, gathering each layer's parameters for its forward and backward
    (partition/costs.py fsdp_step, fsdp_memory). bf16 when the profile was timed in bf16; checkpoint
    always recomputes every layer, auto every layer where it would not fit otherwise."""
    p = len(devices)
    batch = profiles[0].batch
    by_count = replica_profiles(strategy, profiles, p)
    if isinstance(by_count, Prediction):
        return by_count
    layers = by_count[p].layers
    bf16 = by_count[p].training.bf16
    unmodelled = unmodelled_bytes(profiles, by_count[p].micro_batch)

    def price(recompute: bool):
        return (costs.fsdp_step(layers, p, links, scale=calibration(list(profiles)), bf16=bf16, recompute=recompute,
                                blocks=costs.fsdp_blocks(layers, by_count[p].granularity)),
                [costs.fsdp_memory(layers, p, training.states, bf16, recompute=recompute) + unmodelled] * p)
    return replica_prediction(strategy, price, batch, caps, speeds, training)  # every gather waits for the slowest


def price_device_map(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """accelerate's device_map="auto": the whole batch through the layers on the devices accelerate puts
    them on, one device at a time. Priced as a Plan of accelerate's cuts with one micro-batch on the GPipe
    schedule (the simulator), plus the output's trip back to the first device and its gradient's trip
    forth (accelerate's hooks return the output where the input came from).

    accelerate cuts by the module's sizes, so this builds the module (_model_for_sizes) and imports torch
    and accelerate, unless the profile cache kept the cuts (device_map_cuts); a profile whose model cannot
    be built here gets accelerate's cuts of a stand-in made of its layers' parameter bytes, an estimate
    that the reason says."""
    whole = next((pr for pr in profiles if pr.micro_batches == 1), None)
    if whole is None:
        return Prediction(strategy.name, None, None, [], False, 1, IN_TURN, "no profile of the whole batch")
    cuts = device_map_cuts(whole, len(devices), caps)
    try:
        if "error" in cuts:
            raise UserError(cuts["error"])
        plan = plan_with_bounds(profiles, devices, cuts["bounds"], schedule=IN_TURN, speeds=speeds,
                                link_gbps=links.copy_gbps if len(devices) > 1 else 0.0,
                                link_latency_ms=links.latency_ms, optimizer=training.optimizer,
                                balanced_by="accelerate")
    except UserError as exc:  # no chain of stages; parameters that fit nowhere
        return Prediction(strategy.name, None, None, [], False, 1, IN_TURN, str(exc).splitlines()[0])
    step = plan.predicted_step_ms
    if len(plan.stages) > 1:
        step += 2 * transfer_ms(whole.layers[-1].output_bytes, links.copy_gbps, links.latency_ms)
    if one_cpu_process(strategy, devices):  # the stages take turns on one process's threads
        step = sum(s.forward_ms + s.backward_ms for s in plan.stages)
    memory = plan.memory_per_device() + [0] * (len(devices) - plan.device_count)  # devices left empty
    fits = within_caps(memory, caps)
    reasons = []
    if cuts["estimated"]:
        reasons.append(f"cuts estimated from the layers' parameter bytes ({cuts['estimated']})")
    return Prediction(strategy.name, step, whole.batch / step * 1e3 if step > 0 else None, memory, fits, 1, IN_TURN,
                      "; ".join(reasons), plan=plan)


def device_map_cuts(whole: Profile, devices: int, caps: Sequence[float] | None) -> dict[str, Any]:
    """accelerate's cuts of the profiled model over `devices` devices of `caps` bytes: {"bounds": layer
    bounds, "estimated": why they come from a stand-in, or ""}, or {"error": why there are none}. Kept in
    the profile cache beside the profile they were read for (its profile_id), since reading the sizes
    builds the model, which a cached answer must not wait for."""
    from pipebench.partition.cache import ProfileCache, cache_enabled, file_digest, library_versions

    # Caps that hold the parameters twice over change nothing in accelerate's arithmetic (each device but
    # the last gets the model's share plus a buffer, the last whatever is left): one key for all of them,
    # so that a GPU whose free memory moved a little since still finds its cuts.
    ample = caps is not None and min(caps) >= 2 * sum(layer.param_bytes for layer in whole.layers)
    key = {"device_map": whole.profile_id, "devices": devices,
           "caps": "ample" if ample else None if caps is None else list(caps),
           "code": file_digest(Path(__file__).with_name("devicemap.py")),
           "libraries": library_versions(("accelerate",))}
    store = ProfileCache() if whole.profile_id and cache_enabled() else None
    kept = store.recall("device-map", key) if store is not None else None
    if isinstance(kept, dict) and (isinstance(kept.get("error"), str) or (
            isinstance(kept.get("estimated"), str) and isinstance(kept.get("bounds"), list)
            and all(isinstance(b, int) for b in kept["bounds"]))):
        return kept
    import torch

    from pipebench.bench.strategies.devicemap import device_map_bounds, layer_size_bounds

    model, why_not = _model_for_sizes(whole)
    try:
        if model is not None:
            cuts = {"bounds": device_map_bounds(model, devices, caps, layers=[layer.name for layer in whole.layers]),
                    "estimated": ""}
        else:
            cuts = {"bounds": layer_size_bounds([layer.param_bytes for layer in whole.layers], devices, caps),
                    "estimated": why_not}
    except (UserError, torch.cuda.OutOfMemoryError) as exc:  # no chain of stages; parameters that fit nowhere
        cuts = {"error": str(exc).splitlines()[0]}
    if store is not None:
        store.keep("device-map", key, cuts)
    return cuts


def _model_for_sizes(profile: Profile):
    """(the profiled model, None) for accelerate to read its sizes, or (None, why not) where it cannot be
    built here. Both the zoo's models and models of your own are built on the meta device, never run."""
    import dataclasses
    from types import SimpleNamespace

    from pipebench import models
    from pipebench.models.source import ModelSource, module_for_sizes

    try:
        if models.is_user_model(profile.model):
            fields = {f.name for f in dataclasses.fields(ModelSource)} - {"target"}
            source = ModelSource(profile.model, **{k: v for k, v in profile.config.items() if k in fields})
            return SimpleNamespace(module=module_for_sizes(source)), None
        return models.get_model(profile.model, profile.flavour or None, device="meta", **profile.config), None
    except UserError as exc:
        return None, str(exc).splitlines()[0]


def price_hybrid(strategy, profiles, devices, caps, speeds, links, training, micro_batches=None) -> Prediction:
    """hybrid: copies of one pipeline over `stages_per_replica` devices, each training on batch / replicas
    samples. The Plan is planned for one replica (on the profiles as one replica's batch sees them) and
    its step is the Plan's plus each stage's DDP all-reduce of its gradients over the replicas (after
    the schedule, not overlapped; the stages' all-reduces run at once, the slowest ends the step). The
    slowest copy of each stage sets its speed; the tightest cap its memory."""
    k, p, batch = strategy.stages_per_replica, len(devices), profiles[0].batch
    unavailable = lambda why: Prediction(strategy.name, None, None, [], False, micro_batches or 1,  # noqa: E731
                                         strategy.torch_schedule, why)
    if p < 2 * k or p % k:
        return unavailable(f"needs {2 * k} or more devices, a multiple of {k} ({k} pipeline stages x 2 or more "
                           f"replicas); this run has {p}")
    replicas = p // k
    if (why := split_error(batch, replicas, strategy.name)) is not None:
        return unavailable(why)
    share = [replace(pr, batch=batch // replicas) for pr in profiles if (batch // replicas) % pr.micro_batch == 0]
    if not share:
        return unavailable(f"no profile at a micro-batch that splits a replica's {batch // replicas} samples")
    per_stage = lambda values, pick: [pick(values[r * k + s] for r in range(replicas)) for s in range(k)]  # noqa: E731
    one = price_plan(strategy, share, devices[:k], per_stage(caps, min) if caps else None,
                        per_stage(speeds, min) if speeds else None, links, training, micro_batches)
    if one.plan is None:
        return replace(one, peak_memory_bytes=one.peak_memory_bytes * replicas)
    layers = share[0].layers
    allreduce = max(costs.allreduce_ms(sum(l.param_bytes for l in layers[s.first_layer:s.end_layer]), replicas, links)
                    for s in one.plan.stages)
    step = one.predicted_step_ms + allreduce
    return replace(one, predicted_step_ms=step, predicted_samples_per_s=batch / step * 1e3 if step > 0 else None,
                   peak_memory_bytes=one.peak_memory_bytes * replicas)

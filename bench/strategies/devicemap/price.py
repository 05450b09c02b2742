"""accelerate's device_map="auto": its price and accelerate's cuts (kept in the profile cache), without
torch until the cuts must be read from a built model."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.pricing import Pricing, one_cpu_process
from pipebench.base.errors import UserError
from pipebench.partition.planning.cuts import transfer_ms
from pipebench.partition.planning.memory import within_caps
from pipebench.partition.planning.plan import plan_with_bounds
from pipebench.partition.profiling.profile_record import Profile
from pipebench.base.schedules import IN_TURN
from pipebench.base.training import Training

__all__ = ["price_device_map", "device_map_cuts"]

def price_device_map(pricing: Pricing) -> Prediction:
    """accelerate's device_map="auto": the whole batch through the layers on the devices accelerate puts
    them on, one device at a time. Priced as a Plan of accelerate's cuts with one micro-batch on the GPipe
    schedule (the simulator), plus the output's trip back to the first device and its gradient's trip
    forth (accelerate's hooks return the output where the input came from).

    accelerate cuts by the module's sizes, so this builds the module (_model_for_sizes) and imports torch
    and accelerate, unless the profile cache kept the cuts (device_map_cuts); a profile whose model cannot
    be built here gets accelerate's cuts of a stand-in made of its layers' parameter bytes, an estimate
    that the reason says."""
    strategy, profiles, devices, caps, links = (pricing.strategy, pricing.profiles, pricing.devices, pricing.caps,
                                                pricing.links)
    whole = next((pr for pr in profiles if pr.micro_batches == 1), None)
    if whole is None:
        return pricing.no_figure("no profile of the whole batch", schedule=IN_TURN)
    cuts = device_map_cuts(whole, len(devices), caps)
    try:
        if "error" in cuts:
            raise UserError(cuts["error"])
        request = pricing.request.with_(schedule=IN_TURN, virtual_stages=1, micro_batches=1,
                                        link_gbps=links.copy_gbps if len(devices) > 1 else 0.0,
                                        link_latency_ms=links.latency_ms, training=Training(optimizer=pricing.training.optimizer))
        plan = plan_with_bounds(profiles, request, cuts["bounds"], balanced_by="accelerate")
    except UserError as exc:  # no chain of stages; parameters that fit nowhere
        return pricing.no_figure(str(exc).splitlines()[0], schedule=IN_TURN)
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
    return Prediction.of_step(strategy.name, step, whole.batch, memory=memory, fits=fits, schedule=IN_TURN,
                              reason="; ".join(reasons), plan=plan)


def device_map_cuts(whole: Profile, devices: int, caps: Sequence[float] | None) -> dict[str, Any]:
    """accelerate's cuts of the profiled model over `devices` devices of `caps` bytes: {"bounds": layer
    bounds, "estimated": why they come from a stand-in, or ""}, or {"error": why there are none}. Kept in
    the profile cache beside the profile they were read for (its profile_id), since reading the sizes
    builds the model, which a cached answer must not wait for."""
    from pipebench.partition.profiling.cache import ProfileCache, cache_enabled, file_digest, library_versions

    # Caps that hold the parameters twice over change nothing in accelerate's arithmetic (each device but
    # the last gets the model's share plus a buffer, the last whatever is left): one key for all of them,
    # so that a GPU whose free memory moved a little since still finds its cuts.
    ample = caps is not None and min(caps) >= 2 * sum(layer.param_bytes for layer in whole.layers)
    key = {"device_map": whole.profile_id, "devices": devices,
           "caps": "ample" if ample else None if caps is None else list(caps),
           "code": file_digest(Path(__file__).with_name("trainer.py")),
           "libraries": library_versions(("accelerate",))}
    store = ProfileCache() if whole.profile_id and cache_enabled() else None
    kept = store.recall("device-map", key) if store is not None else None
    if isinstance(kept, dict) and (isinstance(kept.get("error"), str) or (
            isinstance(kept.get("estimated"), str) and isinstance(kept.get("bounds"), list)
            and all(isinstance(b, int) for b in kept["bounds"]))):
        return kept
    import torch

    from pipebench.bench.strategies.devicemap.trainer import device_map_bounds, layer_size_bounds

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

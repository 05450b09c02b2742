"""A Plan in the terms of the engines people already train with: torchtitan, DeepSpeed, Megatron-LM and
Hugging Face accelerate, so that the engine trains with pipebench's measured cut and the user keeps it.

Each engine places whole modules of its own kind, its *units*; a plan's layer names (module paths from
the capture, `layers.3`, `model.layers.3.mlp`, the zoo's `block_3_attn`) say which unit holds each layer:

    torchtitan  a top-level module or an item of a top-level ModuleList/ModuleDict (`layers.3`): what
                its `_split_module` keeps or drops for `module_fqns_per_model_part`
    deepspeed   one entry of PipelineModule's layer list, run as a chain: a zoo model's own layers
                (nn.Sequential children), else a numbered block (`model.layers.3`) or a module outside one
    megatron    a transformer layer `t` (a numbered block), between the embedding `E` (every module
                before the first block) and the loss `L` (every module after the last: norm and head)
    device-map  any module: accelerate's device_map names modules at any depth

A cut inside a unit moves to the nearest cut the engine can make (of the two on either side of each
cut, the pair the plan's simulator prices fastest when the profiles are at hand, else the nearest), and
the export carries that cut's predicted step beside the plan's. An engine that cannot place the plan at
all raises one UserError line. Pure: no torch (plan_with_bounds, handed in by Plan.export, prices the moved cuts).
"""
from __future__ import annotations

import json
from itertools import product
from typing import Any, Callable, Sequence

from pipebench.base.errors import UserError
from pipebench.base.schedules import SCHEDULES
from pipebench.base.training import Training
from pipebench.request import Request

__all__ = ["ENGINES", "export", "check_engine", "block", "summary"]

ENGINES = ("torchtitan", "deepspeed", "megatron", "device-map")

def _torchtitan_schedule(schedule: str) -> str:
    """torchtitan names torch's schedule classes without their "Schedule" prefix (Interleaved1F1B)."""
    return SCHEDULES[schedule].torch_class.removeprefix("Schedule")
"""pipebench's schedule names as torch's get_schedule_class (and so torchtitan's config) spells them."""


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise UserError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    return engine


def block(name: str) -> str | None:
    """The numbered block holding layer `name`: its path up to the first numeric part
    (`model.layers.3.mlp` -> `model.layers.3`; the zoo's flattened `block_3_attn` -> `block_3`); None for a
    layer outside any block (`model.embed_tokens`, `head`)."""
    sep = "." if "." in name else "_"
    parts = name.split(sep)
    for i, part in enumerate(parts[1:], 1):
        if part.isdigit():
            return sep.join(parts[:i + 1])
    return None


def export(plan, engine: str, profiles: Sequence[Any] | None = None, *,
           price_bounds: Callable[..., Any] | None = None) -> dict[str, Any]:
    """`plan` in `engine`'s own terms (see the module docstring), as a plain dict.

    Every export holds: engine, stages (the layer names of each stage, as the engine will place them),
    bounds, moved (whether a cut had to move), predicted_step_ms (the plan's, or the moved cut's when the
    profiles price it; None when they are not at hand), plan_step_ms, note; and the engine's own keys.
    price_bounds: partition.planning.plan.plan_with_bounds, which Plan.export hands in (this module sits above the
    planner and imports none of it)."""
    check_engine(engine)
    names = [name for stage in plan.stages for name in stage.layers]
    units = _UNITS[engine](plan, names)
    bounds, moved, step, note = _expressible(plan, engine, names, units, profiles, price_bounds)
    stages = [names[a:b] for a, b in zip(bounds, bounds[1:])]
    common = {"engine": engine, "model": plan.model, "stages": stages, "bounds": bounds, "moved": moved,
              "predicted_step_ms": step, "plan_step_ms": plan.predicted_step_ms, "note": note}
    unit_stages = [_runs([units[i] for i in range(a, b)]) for a, b in zip(bounds, bounds[1:])]
    return {**common, **_OWN[engine](plan, bounds, unit_stages)}


def summary(exported: dict[str, Any]) -> str:
    """One line on what the export did to the plan's cut."""
    engine = exported["engine"]
    if not exported["moved"]:
        return f"{engine} expresses the plan's cut as it is"
    step = exported["predicted_step_ms"]
    priced = (f"predicted step {step:.2f} ms against the plan's {exported['plan_step_ms']:.2f} ms"
              if step is not None else "not priced (no profile at hand)")
    return f"{engine} cannot cut inside its units: the cut moved to {exported['bounds'][1:-1]}, {priced}"


# ------------------------------------------------------------------------------------------ units


def _torchtitan_units(plan, names: list[str]) -> list[str]:
    deep = [n for n in names if (b := block(n)) is not None and "." in b and b.count(".") > 1]
    if deep:
        raise UserError(f"torchtitan splits a model's top-level modules and the items of a top-level "
                        f"ModuleList/ModuleDict (`layers.0`); {plan.model}'s blocks sit deeper "
                        f"(`{block(deep[0])}`), so torchtitan cannot build its stages")
    return [_torchtitan_unit(n) for n in names]


def _torchtitan_unit(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and parts[1].isdigit() else parts[0]


def _deepspeed_units(plan, names: list[str]) -> list[str]:
    if plan.virtual_stages > 1:
        raise UserError(f"DeepSpeed's PipelineModule runs one stage per rank; this plan puts "
                        f"{plan.virtual_stages} on each device ({plan.schedule}): plan with --schedule 1f1b")
    return [n if "." not in n else (block(n) or n) for n in names]


def _megatron_units(plan, names: list[str]) -> list[str]:
    if SCHEDULES[plan.schedule].layout == "v":
        raise UserError("Megatron-LM places virtual stages in loops, not in a V: plan with --schedule "
                        "interleaved to export to megatron")
    blocks = [block(n) for n in names]
    numbered = [i for i, b in enumerate(blocks) if b is not None]
    if not numbered:
        raise UserError(f"Megatron-LM's layout holds transformer layers between an embedding and a loss; "
                        f"{plan.model} has no numbered blocks (`layers.0`) among its layers")
    first, last = numbered[0], numbered[-1]
    stray = [names[i] for i in range(first, last) if blocks[i] is None]
    if stray:
        raise UserError(f"Megatron-LM's layout holds only transformer layers between the embedding and the "
                        f"loss; {plan.model}'s `{stray[0]}` sits between its blocks")
    return ["E" if i < first else "L" if i > last else blocks[i] for i in range(len(names))]


def _module_units(plan, names: list[str]) -> list[str]:
    return list(names)


_UNITS: dict[str, Callable[[Any, list[str]], list[str]]] = {
    "torchtitan": _torchtitan_units, "deepspeed": _deepspeed_units, "megatron": _megatron_units,
    "device-map": _module_units}


# ---------------------------------------------------------------------------- each engine's terms


def _torchtitan(plan, bounds, unit_stages) -> dict[str, Any]:
    parallelism = {"pipeline_parallel_degree": plan.device_count,
                   "pipeline_parallel_schedule": _torchtitan_schedule(plan.schedule),
                   "pipeline_parallel_microbatch_size": plan.micro_batch_size,
                   "module_fqns_per_model_part": unit_stages}
    toml = "\n".join(["[training]", f"local_batch_size = {plan.batch}", "", "[parallelism]",
                      *(f"{key} = {json.dumps(value)}" for key, value in parallelism.items())]) + "\n"
    return {"module_fqns_per_model_part": unit_stages, "parallelism": parallelism, "toml": toml}


def _deepspeed(plan, bounds, unit_stages) -> dict[str, Any]:
    """parts: PipelineModule's own `parts` over its layer list (stage s runs layers parts[s]:parts[s+1]),
    which `partition_method` ('parameters', 'uniform', 'type:regex') cannot pass: _partition_layers sets it."""
    parts = [0]
    for units in unit_stages:
        parts.append(parts[-1] + len(units))
    return {"parts": parts, "layers": [u for units in unit_stages for u in units], "num_stages": len(unit_stages),
            "config": {"train_micro_batch_size_per_gpu": plan.micro_batch_size,
                       "gradient_accumulation_steps": plan.micro_batches}}


def _megatron(plan, bounds, unit_stages) -> dict[str, Any]:
    counts = [sum(u not in ("E", "L") for u in units) for units in unit_stages]
    layout = "|".join(("E" if s == 0 else "") + _ts(count) + ("L" if s == len(counts) - 1 else "")
                      for s, count in enumerate(counts))
    pp = plan.device_count
    args = ["--pipeline-model-parallel-size", str(pp), "--num-layers", str(sum(counts)),
            "--pipeline-model-parallel-layout", layout]
    middle = counts[1:-1]
    first_last = None
    if plan.virtual_stages == 1 and pp > 1 and len(set(middle)) <= 1 and counts[0] and counts[-1]:
        first_last = ["--pipeline-model-parallel-size", str(pp), "--num-layers", str(sum(counts)),
                      "--decoder-first-pipeline-num-layers", str(counts[0]),
                      "--decoder-last-pipeline-num-layers", str(counts[-1])]
    return {"pipeline_model_parallel_layout": layout, "layers_per_stage": counts, "args": args,
            "first_last_args": first_last, "micro_batch_size": plan.micro_batch_size,
            "num_micro_batches": plan.micro_batches}


def _ts(count: int) -> str:
    return "t" * count if count < 3 else f"t*{count}"


def _device_map(plan, bounds, unit_stages) -> dict[str, Any]:
    return {"device_map": {name: _accelerate_device(plan.stages[s].device)
                           for s, units in enumerate(unit_stages) for name in units}}


def _accelerate_device(device: str) -> int | str:
    """accelerate's spelling of a device: a GPU by its index, anything else by name ("cpu")."""
    kind, _, index = device.partition(":")
    return int(index or 0) if kind == "cuda" else device


_OWN = {"torchtitan": _torchtitan, "deepspeed": _deepspeed, "megatron": _megatron, "device-map": _device_map}


# ----------------------------------------------------------------------------- moving the cuts


def _runs(units: list[str]) -> list[str]:
    """Consecutive equal units once each: the engine's modules of one stage, in order."""
    return [u for i, u in enumerate(units) if i == 0 or units[i - 1] != u]


def _expressible(plan, engine, names, units, profiles, price_bounds=None):
    """(bounds, moved, predicted step, note): the plan's cuts, or the nearest the engine can make."""
    bounds = list(plan.bounds)
    allowed = [i for i in range(1, len(names)) if units[i - 1] != units[i]]
    if all(b in allowed for b in bounds[1:-1]):
        return bounds, False, plan.predicted_step_ms, ""
    cuts = len(bounds) - 2
    if len(allowed) < cuts:
        raise UserError(f"{engine} can cut {plan.model} in {len(allowed)} place(s) only (between its "
                        f"{', '.join(_runs(units))}); the plan has {cuts + 1} stages")
    options = []
    for cut in bounds[1:-1]:
        left, right = [a for a in allowed if a <= cut], [a for a in allowed if a >= cut]
        options.append(sorted({*left[-1:], *right[:1]}))
    candidates = [[0, *c, len(names)] for c in product(*options) if all(a < b for a, b in zip(c, c[1:]))]
    if not candidates:
        candidates = [_nearest(bounds, allowed, len(names))]
    candidates.sort(key=lambda c: sum(abs(a - b) for a, b in zip(c, bounds)))
    price = _pricer(plan, profiles, price_bounds)
    if price is None:
        why = ("several stages per device" if plan.virtual_stages > 1 else "no profile at hand")
        return candidates[0], True, None, f"cuts {plan.bounds[1:-1]} moved to {candidates[0][1:-1]}; not priced ({why})"
    steps = [price(c) for c in candidates]
    best = min(range(len(candidates)), key=steps.__getitem__)
    return candidates[best], True, steps[best], (
        f"cuts {plan.bounds[1:-1]} moved to {candidates[best][1:-1]}: predicted step {steps[best]:.2f} ms "
        f"against the plan's {plan.predicted_step_ms:.2f} ms")


def _nearest(bounds, allowed, n) -> list[int]:
    """The strictly increasing choice of allowed cuts closest in total to `bounds`' inner cuts (dynamic
    programme over cuts and positions)."""
    cuts = bounds[1:-1]
    inf = float("inf")
    cost = [[inf] * len(allowed) for _ in cuts]
    back = [[-1] * len(allowed) for _ in cuts]
    for j, a in enumerate(allowed):
        cost[0][j] = abs(a - cuts[0])
    for k in range(1, len(cuts)):
        best, arg = inf, -1
        for j, a in enumerate(allowed):
            if j and cost[k - 1][j - 1] < best:
                best, arg = cost[k - 1][j - 1], j - 1
            cost[k][j], back[k][j] = best + abs(a - cuts[k]), arg
    j = min(range(len(allowed)), key=cost[-1].__getitem__)
    chosen = []
    for k in range(len(cuts) - 1, -1, -1):
        chosen.append(allowed[j])
        j = back[k][j]
    return [0, *reversed(chosen), n]


def _pricer(plan, profiles, plan_with_bounds):
    """A function pricing bounds with the plan's own simulator, or None where it cannot."""
    if not profiles or plan.virtual_stages > 1 or plan_with_bounds is None:
        return None

    def price(bounds):
        return plan_with_bounds(profiles, request, bounds).predicted_step_ms

    request = Request(devices=plan.devices, schedule=plan.schedule, micro_batches=plan.micro_batches,
                      link_gbps=plan.link_gbps, link_latency_ms=plan.link_latency_ms,
                      training=Training(optimizer=plan.training.optimizer))
    return price

"""Issue 25: the predicted step of each engine's default split beside pipebench's, from one saved profile of
a zoo model with numbered blocks (gpt), every split priced by the same simulator, schedule and
micro-batches. The defaults come from the engines' own code where it is installed (pip install
pipebench[engines]): DeepSpeed's partition_balanced over parameter counts ('parameters'), torchtitan's
_generate_llm_fqn_per_model_part (even layers, the first and last stages one lighter), Megatron-LM's
even layers per stage (printed where they divide), accelerate's by-memory map (devicemap.layer_size_bounds).

    pipebench plan --model gpt --flavour tiny --set depth=6 --set width=128 --set vocab=8192 --batch 16 \
        --stages 4 --save-profile gpt6.json
    python3 scripts/gpu/engine_defaults.py gpt6.json 2 3 4
"""
from __future__ import annotations

import sys

from pipebench.bench.strategies.devicemap.trainer import layer_size_bounds
from pipebench.partition.planning.engines import block
from pipebench.partition.planning.plan import plan_with_bounds
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import load_profiles
from pipebench.request import Request


def defaults(layers, stages: int) -> dict[str, list[int]]:
    """Each engine's default cuts over the profile's layers (names as the zoo's gpt has them)."""
    from deepspeed.runtime.utils import partition_balanced
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part

    names = [layer.name for layer in layers]
    blocks = sorted({int(block(n).rsplit("_", 1)[1]) for n in names if block(n)})
    first = {b: names.index(next(n for n in names if block(n) == f"block_{b}")) for b in blocks}
    end = {**{f"layers.{b}": max(i for i, n in enumerate(names) if block(n) == f"block_{b}") + 1 for b in blocks},
           "tok_embeddings": 1, "lm_head": len(names)}
    cuts = {"DeepSpeed 'parameters'": [int(b) for b in partition_balanced([l.params for l in layers], stages)],
            "torchtitan even layers": [0] + [max(end[f] for f in part if f in end)
                                             for part in _generate_llm_fqn_per_model_part(stages, len(blocks), 1, 1)]}
    if len(blocks) % stages == 0:
        per = len(blocks) // stages
        cuts["Megatron even layers"] = [0, *(first[blocks[k * per]] for k in range(1, stages)), len(names)]
    cuts["accelerate by memory"] = layer_size_bounds([l.param_bytes for l in layers], stages)
    return cuts


def main(path: str, *stage_counts: str) -> None:
    profiles = load_profiles(path)
    for stages in map(int, stage_counts):
        devices = ["cpu"] * stages
        plan = make_plan(profiles, Request(devices=devices, schedule="1f1b", link_gbps=0.0))
        m = plan.micro_batches
        layers = next(p for p in profiles if p.micro_batches == m).layers

        def step(bounds):
            return plan_with_bounds(profiles, Request(devices=devices, schedule="1f1b", micro_batches=m), bounds).predicted_step_ms

        own = step(plan.bounds)
        print(f"{plan.model} {plan.config}: {stages} stages, 1f1b, {m} micro-batches of {plan.micro_batch_size}")
        for name, bounds in {"pipebench (time)": plan.bounds, **defaults(layers, stages)}.items():
            took = step(bounds)
            print(f"  {name:24s} cuts {str(bounds[1:-1]):12s} {took:8.2f} ms  ({took / own:.2f}x pipebench's)")


if __name__ == "__main__":
    main(*sys.argv[1:])

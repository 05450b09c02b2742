"""Why are ResNet-101's zero-bubble predictions pessimistic? Time I and W (torch's stage_backward_input
and stage_backward_weight) layer by layer, summed, against the same layers run as one stage.

    python3 scripts/gpu/split_probe.py [--model resnet101] [--micro-batch 128] [--cuts 7,12,25,40]

Prints, per stage [a, b) of the cuts: the per-layer sums of F, B, I and W and the one-stage figures.
"""
from __future__ import annotations

import argparse
import json

import torch

from pipebench.models import get_model
from pipebench.partition.capture.graph import Segment
from pipebench.partition.profiling.segment_timing import profile_segment
from pipebench.base.training import Training, set_precision


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet101")
    parser.add_argument("--flavour", default=None)
    parser.add_argument("--micro-batch", type=int, default=128)
    parser.add_argument("--cuts", default="7,12,25,40")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda":
        set_precision(Training())
    model = get_model(args.model, args.flavour) if args.flavour else get_model(args.model)
    layers = model.layers.to(device).train()
    x, _ = model.make_batch(args.micro_batch, seed=0, device=device)
    inputs = [x]
    with torch.no_grad():
        for layer in layers:
            inputs.append(layer(inputs[-1]))
    cuts = [int(c) for c in args.cuts.split(",")]

    def figures(module, inp):
        """F, B, I and W of `module` on `inp`, timed the way the profiler times a segment."""
        segment = Segment(index=1, name="probe", begins_at="", module=module, args=(inp,), kwargs={}, outputs=[],
                          param_count=0, param_bytes=0, arg_sources=[0])
        measured = profile_segment(segment, device, args.repeats, 2, set())
        return {"F": measured["forward_ms"], "B": measured["backward_ms"],
                "I": measured["backward_input_ms"], "W": measured["backward_weight_ms"]}

    report = []
    for a, b in zip(cuts, cuts[1:]):
        for _ in range(2):  # warm-up of cuDNN's autotuning and the allocator, then measured
            per_layer = [figures(layers[i], inputs[i]) for i in range(a, b)]
            stage = figures(torch.nn.Sequential(*layers[a:b]), inputs[a])
        summed = {k: round(sum(f[k] for f in per_layer), 2) for k in "FBIW"}
        report.append({"layers": [a, b], "per_layer_sum_ms": summed, "stage_ms": {k: round(v, 2) for k, v in stage.items()}})
        print(json.dumps(report[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

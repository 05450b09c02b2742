"""Why are ResNet-101's zero-bubble predictions pessimistic? Time I and W (torch's stage_backward_input
and stage_backward_weight) layer by layer, summed, against the same layers run as one stage.

    python3 bench/gpu/split_probe.py [--model resnet101] [--micro-batch 128] [--cuts 7,12,25,40]

Prints, per stage [a, b) of the cuts: the per-layer sums of F, B, I and W and the one-stage figures.
"""
from __future__ import annotations

import argparse
import json

import torch

from pipebench.models import get_model
from pipebench.partition.profiler import _split_backward_ms, _timed, set_fast_math


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
        set_fast_math()
    model = get_model(args.model, args.flavour) if args.flavour else get_model(args.model)
    layers = model.layers.to(device).train()
    x, _ = model.make_batch(args.micro_batch, seed=0, device=device)
    inputs = [x]
    with torch.no_grad():
        for layer in layers:
            inputs.append(layer(inputs[-1]))
    cuts = [int(c) for c in args.cuts.split(",")]

    def figures(module, inp):
        fresh = lambda: inp.clone().requires_grad_().clone()  # noqa: E731
        out = module(fresh())
        grad = torch.ones_like(out)
        outs = [module(fresh()) for _ in range(args.repeats)]
        _, backward_s = _timed(lambda: [torch.autograd.backward(o, grad) for o in outs], device)
        xs = [fresh() for _ in range(args.repeats)]
        _, forward_s = _timed(lambda: [module(v) for v in xs], device)
        i_ms, w_ms = _split_backward_ms(module, fresh, grad, device, args.repeats, 2)
        for p in module.parameters():
            p.grad = None
        return {"F": forward_s * 1e3 / args.repeats, "B": backward_s * 1e3 / args.repeats, "I": i_ms, "W": w_ms}

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

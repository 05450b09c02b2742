"""Issue 12 on 2 GPUs: pipebench's time-balanced plan against the split at the parameter midpoint (what a
torch.distributed.pipelining user who balances parameters gets), same model, schedule and micro-batches,
trained in fresh processes in alternating order.

    python3 scripts/gpu/split_against.py --model scripts/gpu/llama_1b.py:llama_1b --batch 32 --micro-batches 4,8 \
        --set input_shape=512 --set input_dtype=int64 --set token_range=32000 --out DIR
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pipebench
from pipebench.base.step_stats import samples_per_s
from pipebench.bench.launch.job import Job
from pipebench.bench.launch.sessions import Session
from pipebench.bench.launch.spawn import call_in_child
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import load_profiles, save_profiles
from pipebench.base.text.parse import parse_override
from pipebench.request import Request


def profile_to(path: str, model: str, batch: int, counts: list[int], settings: dict) -> None:
    import torch

    if torch.__version__.startswith("2.11"):
        # torch 2.11's pipeline() cannot split a Llama at its rotary embedding ("unexpected placeholder node
        # at index 1" in torch/export/unflatten.py; 2.14 can): leave that module out of the cut candidates.
        from pipebench.partition.capture import graph

        frontier = graph.frontier_of
        graph.frontier_of = lambda calls, depth: (lambda names, dropped: (
            [n for n in names if not n.endswith("rotary_emb")], dropped))(*frontier(calls, depth))
    profiles = []
    for m in counts:
        profiles += pipebench.profile(model, batch=batch, device="cuda:0", devices=["cuda:0", "cuda:1"],
                                      micro_batches=m, settings=settings, note=print)
    save_profiles(profiles, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--micro-batches", "--chunks", dest="micro_batches", default="4,8")
    parser.add_argument("--set", dest="settings", action="append", default=[])
    parser.add_argument("--strategy", default="pp-1f1b")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {}
    for text in args.settings:
        key, value = parse_override(text)
        settings[key] = [int(v) for v in str(value).split(",")] if key == "input_shape" else value
    started = time.monotonic()
    path = out / "profile.json"
    counts = [int(c) for c in args.micro_batches.split(",")]
    call_in_child(profile_to, str(path), args.model, args.batch, counts, settings, gpus=[0, 1])
    profiles = load_profiles(path)
    print(f"profiled in {time.monotonic() - started:.0f} s", flush=True)
    devices = ["cuda:0", "cuda:1"]
    link = profiles[0].link_gbps or 0.0
    timed = make_plan(profiles, Request(devices=devices, schedule="1f1b", link_gbps=link, min_micro_batches=2))
    plans = {"pipebench (time)": timed,
             "parameter midpoint": make_plan(profiles, Request(devices=devices, schedule="1f1b", balance="params", link_gbps=link, micro_batches=timed.micro_batches))}
    results = {name: [] for name in plans}
    for name, plan in plans.items():
        plan.save(out / f"plan-{name.split()[0].strip('(')}.json")
        print(f"{name}: cut at {plan.stages[1].layers[0]} (layers per stage {plan.balance}), m={plan.micro_batches},"
              f" predicted {plan.predicted_step_ms:.1f} ms", flush=True)
    for order in (list(plans), list(reversed(plans))):
        for name in order:
            job = Job.from_plan(plans[name], args.strategy, steps=args.steps, warmup=2)
            with Session(job, gpus=[0, 1], timeout=900) as workers:
                results[name] += [workers.step() for _ in range(args.steps)]
                result = workers.finish()
            print(f"{name}: {sum(results[name]) / len(results[name]):.1f} ms per step so far, first loss "
                  f"{result.first_loss:.5f}, peak GiB {[round(b / 2**30, 1) for b in result.peak_memory_bytes]}",
                  flush=True)
    mean = {name: sum(t) / len(t) for name, t in results.items()}
    summary = {
        "model": args.model, "settings": settings, "batch": args.batch, "strategy": args.strategy,
        "plans": {name: {"first_stage_layers": p.balance[0], "cut": p.stages[1].layers[0], "balance": p.balance,
                         "micro_batches": p.micro_batches, "predicted_step_ms": p.predicted_step_ms}
                  for name, p in plans.items()},
        "step_ms": results, "mean_step_ms": mean,
        "samples_per_s": {name: samples_per_s(args.batch, m) for name, m in mean.items()},
        "time_over_midpoint": mean["parameter midpoint"] / mean["pipebench (time)"],
    }
    (out / "split-against.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("samples_per_s", "time_over_midpoint")}, indent=1))


if __name__ == "__main__":
    main()

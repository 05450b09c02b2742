"""What the planner predicts for 2, 4 and 8 GPUs from one GPU's profile, for every pipeline schedule.

    python3 scripts/gpu/scaling_predictions.py PROFILE.json [...] --link-gbps G --csv OUT.csv

No GPU is needed: it plans from saved profiles (e.g. those the suite saved on an H200). It assumes every
GPU is like the profiled one and every link has the given bandwidth; issue 6 measures the real thing.
"""
from __future__ import annotations

import argparse
import csv
import sys

from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import load_profiles
from pipebench.partition.planning.schedule_order import ideal_efficiency
from pipebench.base.schedules import IN_TURN, SCHEDULES
from pipebench.base.text.units import GIB
from pipebench.request import Request

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+")
    parser.add_argument("--link-gbps", type=float, default=0.0)
    parser.add_argument("--gpus", default="2,4,8")
    parser.add_argument("--csv", required=True)
    args = parser.parse_args(argv)
    rows = []
    for path in args.profiles:
        profiles = load_profiles(path)
        single = make_plan(profiles, Request(devices=["cuda:0"], schedule=IN_TURN, micro_batches=1, link_gbps=0.0))
        for p in [int(g) for g in args.gpus.split(",")]:
            for schedule, kind in SCHEDULES.items():
                devices = [f"gpu{i}" for i in range(p)]
                try:
                    plan = make_plan(profiles, Request(devices=devices, schedule=schedule, virtual_stages=kind.stages_per_device, link_gbps=args.link_gbps, min_micro_batches=p if kind.micro_batch_per_stage else 1))
                except ValueError as exc:
                    rows.append({"model": profiles[0].model, "gpus": p, "schedule": schedule, "note": str(exc)})
                    continue
                speedup = plan.predicted_samples_per_s / single.predicted_samples_per_s
                ideal = p * ideal_efficiency(p, plan.micro_batches * kind.stages_per_device)  # GPipe bound, v x m chunks
                rows.append({
                    "model": profiles[0].model, "flavour": profiles[0].flavour, "batch": plan.batch,
                    "device": profiles[0].device_name, "gpus": p, "schedule": schedule, "stages_per_gpu": kind.stages_per_device,
                    "micro_batches": plan.micro_batches, "bounds": " ".join(map(str, plan.bounds)),
                    "predicted_step_ms": round(plan.predicted_step_ms, 1),
                    "predicted_samples_per_s": round(plan.predicted_samples_per_s, 1),
                    "x_single_predicted": round(speedup, 2),
                    "efficiency_vs_p_times_single": round(speedup / p, 3),
                    "ideal_gpipe_x": round(ideal, 2),
                    "bubble": round(plan.bubble_fraction, 3),
                    "max_memory_gib": round(max(plan.memory_per_device()) / GIB, 1), "note": "",
                })
                print(f"{rows[-1]['model']:10} {p} GPUs {schedule:15} m={plan.micro_batches:<3} "
                      f"{speedup:5.2f}x single (predicted), bubble {plan.bubble_fraction:.1%}", file=sys.stderr)
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(args.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

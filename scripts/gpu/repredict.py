"""Predict again, with today's cost models and a given profile, the cases a GPU run measured; no GPU needed.

    python3 scripts/gpu/repredict.py PROFILE.json RESULTS.json

For each ok row: the pipelines are simulated for the very plan that ran (its cuts, micro-batch count and
schedule, read from RESULTS-plans/<plan_id>.plan.json), the replica strategies priced by bench.predict.ranking, so
that a change of cost model can be checked against measurements already made. Prints a markdown table:
measured step, the prediction the row was run with, the prediction now, and their errors.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from pipebench.bench.predict.ranking import predict
from pipebench.bench.strategies import get_strategy
from pipebench.partition.planning.cuts import StageCost, cut_prices, simulate_stages, stage_scale
from pipebench.partition.planning.plan import Plan
from pipebench.partition.profiling.profile_record import load_profiles
from pipebench.request import Request


def predicted_now(row: dict, profiles, plans: Path) -> float:
    strategy = get_strategy(row["strategy"])
    devices = [f"cuda:{i}" for i in range(len(row["gpus"].split(",")))]
    if not strategy.needs_plan:
        return predict(strategy, profiles, Request(devices=devices)).predicted_step_ms
    plan = Plan.load(plans / f"{row['plan_id']}.plan.json")
    profile = {p.micro_batches: p for p in profiles}[plan.micro_batches]
    link = (profile.link_gbps or 0.0) if plan.device_count > 1 else 0.0  # one device: cuts cost nothing
    prices = cut_prices(profile.layers, link, profile.link_latency_ms or 0.0)
    cost = StageCost(profile.layers, [1.0] * len(plan.stages), prices, stage_scale(profiles, len(plan.stages)))
    timeline = simulate_stages(cost.times(plan.bounds), plan.micro_batches, plan.schedule,
                               [prices[b - 1] for b in plan.bounds[1:-1]], plan.device_count, cost.launches(plan.bounds))
    return timeline.step_time


def main(profile_path: str, results_path: str) -> None:
    profiles = load_profiles(profile_path)
    results = Path(results_path)
    plans = results.with_name(results.stem + "-plans")
    print("| case | measured ms | predicted when run | error | predicted now | error |")
    print("|---|---|---|---|---|---|")
    for row in json.loads(results.read_text())["rows"]:
        if row["status"] != "ok":
            continue
        now = predicted_now(row, profiles, plans)
        then = row["predicted_step_ms"]
        label = row["strategy"] + (f" m={row['micro_batches']}" if get_strategy(row["strategy"]).micro_batched else "")
        print(f"| {label} | {row['step_ms']:.1f} | {then:.1f} | {(then / row['step_ms'] - 1) * 100:+.1f}% "
              f"| {now:.1f} | {(now / row['step_ms'] - 1) * 100:+.1f}% |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])

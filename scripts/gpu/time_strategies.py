"""Time the single-process strategies side by side on the GPUs of this machine, from a saved Plan.

    python3 scripts/gpu/time_strategies.py results/.../gpt800m-b64.plan.json --csv out.csv

A stop-gap until the suite (`pipebench run`) exists: same model weights, batch, loss and SGD step for
every strategy; warm-up steps, then timed steps with every GPU synchronised; peak memory per GPU.
"""
from __future__ import annotations

import argparse
import csv
import sys
import time

import torch

from pipebench import models
from pipebench.bench.strategies import STRATEGIES
from pipebench.partition.planning.plan import Plan
from pipebench.base.training import Training, set_precision
from pipebench.base.text.units import format_gib


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--csv")
    args = parser.parse_args()
    plan = Plan.load(args.plan)
    set_precision(Training())
    model = models.get_model(plan.model, plan.flavour)  # on the CPU: every strategy copies these weights
    inputs, targets = model.make_batch(plan.batch, seed=1)
    devices = plan.devices
    rows = []
    for strategy in [s for s in STRATEGIES.values() if not s.process_per_device]:  # one process drives them all
        name = strategy.name + (f" m={plan.micro_batches}" if strategy.micro_batched else "")
        trainer = strategy.trainer_class()(model, devices, plan=None if strategy.one_device else plan,
                                           strategy=strategy, training=Training())
        x, y = inputs.to(devices[0]), targets.to(devices[0])
        for _ in range(args.warmup):
            trainer.step(x, y)
        _sync()
        trainer.reset_peak_memory()
        start = time.perf_counter()
        for _ in range(args.steps):
            trainer.step(x, y)
        _sync()
        step_s = (time.perf_counter() - start) / args.steps
        rows.append({
            "model": plan.model, "strategy": name, "batch": plan.batch, "gpus": len(trainer.devices),
            "step_ms": round(step_s * 1e3, 2), "samples_per_s": round(plan.batch / step_s, 1),
            "peak_gib": " / ".join(format_gib(b) for b in trainer.peak_memory()),
            "first_loss": round(trainer.first_loss, 5),
            "predicted_ms": round(plan.predicted_step_ms, 2) if strategy.micro_batched else "",
        })
        print(rows[-1], flush=True)
        del trainer
        torch.cuda.empty_cache()
    single = rows[0]["samples_per_s"]
    for row in rows:
        row["x_single"] = round(row["samples_per_s"] / single, 2)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    for row in rows:
        print(f"{row['strategy']:>16}  {row['samples_per_s']:>8.1f} samples/s  {row['x_single']:.2f}x  "
              f"peak {row['peak_gib']} GiB  loss {row['first_loss']}  predicted {row['predicted_ms']} ms  measured {row['step_ms']} ms")
    return 0


def _sync():
    for i in range(torch.cuda.device_count()):
        torch.cuda.synchronize(i)


if __name__ == "__main__":
    sys.exit(main())

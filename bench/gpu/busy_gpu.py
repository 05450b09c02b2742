"""Issue 5's demonstration: one GPU under a steady background load of our own; the plan that assumes
equal GPUs against the speed-aware plan, trained side by side in one run.

    PYTHONPATH=. python3 bench/gpu/busy_gpu.py [--model gpt] [--batch 64] [--out DIR]

1. Profile the model on GPU 0 (idle) at every micro-batch size, in a child `pipebench plan`.
2. Start the load: a child process running matrix products on GPU 1 without pause.
3. Probe both GPUs' speed while the load runs (partition.devices.measure_speeds).
4. Plan pp-1f1b twice from the same profile: equal speeds, and the probed speeds.
5. Train each plan with pp-1f1b (bench.launch.Session, 5 timed steps each), alternating the order so
   that drift in the load does not favour one; write both rows and the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

LOAD = """
import torch, time
a = torch.randn(8192, 8192, device='cuda'); b = torch.randn(8192, 8192, device='cuda')
print('load running', flush=True)
while True:
    for _ in range(50):
        a @ b
    torch.cuda.synchronize()
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", default=os.environ.get("OUT", "out") + "/busy-gpu")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from bench.job import job_from_plan
    from bench.launch import Session
    from partition.devices import measure_speeds
    from partition.plan import make_plan
    from partition.profile import load_profiles

    profile_path, plan_path = out / "profile.json", out / "plan-equal-cli.json"
    subprocess.run([sys.executable, "-P", "-m", "bench.cli", "plan", "--model", args.model, "--batch", str(args.batch),
                    "--gpus", "0,1", "--save-profile", str(profile_path), "--json", str(plan_path)], check=True)
    profiles = load_profiles(profile_path)
    link = json.loads(plan_path.read_text())["link_gbps"]

    load = subprocess.Popen([sys.executable, "-c", LOAD], env=dict(os.environ, CUDA_VISIBLE_DEVICES="1"),
                            start_new_session=True)
    try:
        time.sleep(10)  # let the load reach its steady state
        speeds = measure_speeds(["cuda:0", "cuda:1"])
        print(f"speed factors with GPU 1 loaded: {speeds[0]:.2f} / {speeds[1]:.2f}", flush=True)
        devices = ["cuda:0", "cuda:1"]
        plans = {
            "equal": make_plan(profiles, devices, schedule="1f1b", link_gbps=link, min_micro_batches=2),
            "speed-aware": make_plan(profiles, devices, schedule="1f1b", link_gbps=link, min_micro_batches=2,
                                     speeds=speeds),
        }
        results: dict[str, list[float]] = {name: [] for name in plans}
        for name, plan in plans.items():
            plan.save(out / f"plan-{name}.json")
            print(f"{name}: cuts {plan.bounds}, m={plan.micro_batches}, predicted {plan.predicted_step_ms:.1f} ms",
                  flush=True)
        for order in (("equal", "speed-aware"), ("speed-aware", "equal")):
            for name in order:
                job = job_from_plan(plans[name], "pp-1f1b", steps=args.steps, warmup=2)
                with Session(job, gpus=[0, 1], timeout=900) as workers:
                    results[name] += [workers.step() for _ in range(args.steps)]
                    workers.finish()
                print(f"{name}: {sum(results[name]) / len(results[name]):.1f} ms per step so far", flush=True)
    finally:
        os.killpg(load.pid, signal.SIGKILL)
        load.wait()
    mean = {name: sum(t) / len(t) for name, t in results.items()}
    summary = {
        "model": args.model, "batch": args.batch, "speeds": speeds, "link_gbps": link,
        "plans": {name: {"bounds": p.bounds, "micro_batches": p.micro_batches, "predicted_step_ms": p.predicted_step_ms}
                  for name, p in plans.items()},
        "step_ms": results, "mean_step_ms": mean,
        "samples_per_s": {name: args.batch / m * 1e3 for name, m in mean.items()},
        "speed_aware_over_equal": mean["equal"] / mean["speed-aware"],
    }
    (out / "busy-gpu.json").write_text(json.dumps(summary, indent=1))
    print(f"speed-aware plan: {summary['speed_aware_over_equal']:.2f}x the equal-speed plan's throughput "
          f"({summary['samples_per_s']['speed-aware']:.1f} vs {summary['samples_per_s']['equal']:.1f} samples/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

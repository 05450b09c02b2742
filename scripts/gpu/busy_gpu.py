"""Issue 5's demonstration: one GPU under a steady background load of our own; the plan that assumes
equal GPUs against the speed-aware plan, trained side by side in one run.

    python3 scripts/gpu/busy_gpu.py [--model gpt] [--batch 64] [--out DIR]

1. Profile the model on GPU 0 (idle) at every micro-batch size, in a child `pipebench plan`.
2. Start the load: a child process running matrix products on GPU 1 without pause.
3. Snapshot `pipebench devices` (NVML: the load shows as utilisation and another process) and probe
   both GPUs' speed while the load runs (hardware.gpu_probes.measure_speeds).
4. Plan pp-1f1b twice from the same profile: equal speeds, and the probed speeds. Each plan is also
   simulated at the probed speeds, which predicts what the equal plan loses on the loaded machine.
5. Train each plan with pp-1f1b (bench.launch.sessions.Session: `--steps` timed steps and one traced step per
   session), alternating the order so that drift in the load favours neither; write both and the ratio.
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
import torch
from pipebench.request import Request
a = torch.randn(8192, 8192, device='cuda'); b = torch.randn(8192, 8192, device='cuda')
print('load running on', torch.cuda.get_device_name(), flush=True)
while True:
    for _ in range(50):
        a @ b
    torch.cuda.synchronize()
"""


def simulate_at(plan, planned: list[float], actual: list[float]) -> float:
    """The step time `plan`'s cuts take on GPUs running at `actual` speeds, when it was planned for
    `planned` ones (one stage per GPU: a stage's times were divided by its planned speed)."""
    from dataclasses import replace

    def rescaled(stage, k):
        split = {name: getattr(stage, name) * k for name in ("backward_input_ms", "backward_weight_ms")
                 if getattr(stage, name) is not None}
        return replace(stage, forward_ms=stage.forward_ms * k, backward_ms=stage.backward_ms * k, **split)

    stages = [rescaled(s, p / a) for s, p, a in zip(plan.stages, planned, actual)]
    return replace(plan, stages=stages).simulate().step_time


def busy_ms(timeline: list[dict]) -> dict[int, float]:
    """Per GPU, the traced step's time spent in stage operations (ms)."""
    busy: dict[int, float] = {}
    for op in timeline:
        busy[op["device"]] = busy.get(op["device"], 0.0) + op["end_ms"] - op["start_ms"]
    return {d: round(t, 2) for d, t in sorted(busy.items())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", default=os.environ.get("OUT", "out") + "/busy-gpu")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from pipebench.bench.launch.job import Job
    from pipebench.bench.launch.sessions import Session
    from pipebench.hardware.gpu_probes import measure_speeds
    from pipebench.partition.planning.plan_choice import make_plan
    from pipebench.partition.profiling.profile_record import load_profiles

    cli = [sys.executable, "-P", "-m", "pipebench.bench.cli"]
    profile_path, plan_path = out / "profile.json", out / "plan-idle-cli.json"
    subprocess.run(cli + ["plan", "--model", args.model, "--batch", str(args.batch), "--gpus", "0,1",
                          "--save-profile", str(profile_path), "--json", str(plan_path)], check=True)
    profiles = load_profiles(profile_path)
    link = json.loads(plan_path.read_text())["link_gbps"]
    devices = ["cuda:0", "cuda:1"]

    load = subprocess.Popen([sys.executable, "-c", LOAD], env=dict(os.environ, CUDA_VISIBLE_DEVICES="1"),
                            start_new_session=True)
    results: dict[str, list[float]] = {}
    traced: dict[str, list[dict]] = {}
    try:
        time.sleep(15)  # let the load start and reach its steady state
        snapshot = subprocess.run(cli + ["devices"], capture_output=True, text=True)
        (out / "devices-under-load.txt").write_text(snapshot.stdout + snapshot.stderr)
        print(snapshot.stdout, snapshot.stderr, flush=True)
        probes = [measure_speeds(devices, repeats=50) for _ in range(3)]
        speeds = [sorted(p[i] for p in probes)[1] for i in range(len(devices))]  # median of three probes
        print(f"speed factors with GPU 1 loaded: {speeds[0]:.2f} / {speeds[1]:.2f} (probes {probes})", flush=True)
        plans = {
            "equal": make_plan(profiles, Request(devices=devices, schedule="1f1b", link_gbps=link, min_micro_batches=2)),
            "speed-aware": make_plan(profiles, Request(devices=devices, schedule="1f1b", link_gbps=link, min_micro_batches=2, speeds=speeds)),
        }
        planned = {"equal": [1.0, 1.0], "speed-aware": speeds}
        predicted_loaded = {name: simulate_at(plan, planned[name], speeds) for name, plan in plans.items()}
        for name, plan in plans.items():
            plan.save(out / f"plan-{name}.json")
            print(f"{name}: cuts {plan.bounds}, m={plan.micro_batches}, planned step {plan.predicted_step_ms:.1f} ms,"
                  f" predicted at the probed speeds {predicted_loaded[name]:.1f} ms", flush=True)
        results = {name: [] for name in plans}
        for order in (("equal", "speed-aware"), ("speed-aware", "equal")):
            for name in order:
                job = Job.from_plan(plans[name], "pp-1f1b", steps=args.steps, warmup=2)
                with Session(job, gpus=[0, 1], timeout=900) as workers:
                    results[name] += [workers.step() for _ in range(args.steps)]
                    workers.step(trace=True)
                    traced.setdefault(name, []).append(busy_ms(workers.finish().timeline))
                print(f"{name}: {sum(results[name]) / len(results[name]):.1f} ms per step so far; "
                      f"busy ms per GPU in the traced step {traced[name][-1]}", flush=True)
    finally:
        os.killpg(load.pid, signal.SIGKILL)
        load.wait()
    mean = {name: sum(t) / len(t) for name, t in results.items()}
    summary = {
        "model": args.model, "batch": args.batch, "speeds": speeds, "speed_probes": probes, "link_gbps": link,
        "plans": {name: {"bounds": p.bounds, "micro_batches": p.micro_batches,
                         "planned_step_ms": p.predicted_step_ms, "predicted_at_probed_speeds_ms": predicted_loaded[name]}
                  for name, p in plans.items()},
        "step_ms": results, "mean_step_ms": mean, "traced_busy_ms_per_gpu": traced,
        "samples_per_s": {name: args.batch / m * 1e3 for name, m in mean.items()},
        "speed_aware_over_equal": mean["equal"] / mean["speed-aware"],
        "predicted_speed_aware_over_equal": predicted_loaded["equal"] / predicted_loaded["speed-aware"],
    }
    (out / "busy-gpu.json").write_text(json.dumps(summary, indent=1))
    print(f"speed-aware plan: {summary['speed_aware_over_equal']:.2f}x the equal-speed plan's throughput "
          f"({summary['samples_per_s']['speed-aware']:.1f} vs {summary['samples_per_s']['equal']:.1f} samples/s;"
          f" predicted {summary['predicted_speed_aware_over_equal']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

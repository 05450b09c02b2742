"""Cases in one warm worker group, as `pipebench run` runs them: per step the worker's own clock, and its
page faults and user and kernel CPU time read from /proc (no change to the worker).

    python faults_per_case.py torchvision.models:resnet18 single,dataparallel,single,dataparallel,single
"""
import os
import statistics
import sys

from pipebench.bench.launch.job import Job
from pipebench.bench.launch.run_job import Session, WorkerGroups

name, cases = sys.argv[1], sys.argv[2].split(",")
steps = int(os.environ.get("N", 6))
settings = dict(input_shape=[3, 64, 64]) if ":" in name else {}
batch, flavour = (16, None) if ":" in name else (8, "tiny")
tick = os.sysconf("SC_CLK_TCK")


def stat(pid: int) -> tuple[int, float, float]:
    """Minor page faults, user and kernel seconds of process `pid` so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[11]) / tick, int(fields[12]) / tick


with WorkerGroups() as groups:
    for strategy in cases:
        job = Job.by_hand(name, strategy, flavour=flavour, overrides=settings, batch=batch,
                          devices=1 if strategy == "single" else 2, device_type="cpu", steps=steps, warmup=2)
        with Session(job, groups=groups) as workers:
            pid = workers._proc.pid  # one process: the worker itself
            faults, user, kernel = [], [], []
            for _ in range(steps):
                a = stat(pid)
                workers.step()
                b = stat(pid)
                faults.append(b[0] - a[0]), user.append(b[1] - a[1]), kernel.append(b[2] - a[2])
            workers.step(trace=True)
            own = workers.finish().step_ms[:steps]
        print(f"{strategy:13s} step median {statistics.median(own):6.1f} ms | page faults a step "
              f"{statistics.median(faults):6.0f}, user {1e3 * sum(user) / steps:5.1f} ms, kernel "
              f"{1e3 * sum(kernel) / steps:4.1f} ms", flush=True)

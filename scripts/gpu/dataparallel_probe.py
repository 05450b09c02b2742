"""Where does nn.DataParallel's time go on ResNet-101? Times it with and without TF32 + cuDNN autotuning,
beside one GPU under the same settings (run on the 2xH200 machine from the repository root:
`python3 scripts/gpu/dataparallel_probe.py`)."""
from __future__ import annotations

import json
import sys

from pipebench.bench.launch.job import Job
from pipebench.bench.launch.run_job import launch
from pipebench.base.training import Training

rows = []
for fast in (True, False):
    for strategy, devices in (("single", 1), ("dataparallel", 2)):
        job = Job.by_hand("resnet101", strategy, batch=256, devices=devices, steps=3, warmup=2, training=Training(precision="tf32" if fast else "fp32"))
        result = launch(job, gpus=[0, 1][:devices], timeout=600)
        row = {"strategy": strategy, "fast_math": fast, "step_ms": round(result.step_ms_mean, 1),
               "samples_per_s": round(result.samples_per_s, 1), "first_loss": result.first_loss}
        rows.append(row)
        print(json.dumps(row), flush=True)
json.dump(rows, sys.stdout if len(sys.argv) < 2 else open(sys.argv[1], "w"), indent=1)

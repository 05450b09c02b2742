#!/usr/bin/env bash
# What changed since the GPU last ran, on one GPU, from the repository root:
#   bash scripts/gpu/regression_h200.sh OUT
# the GPU tests; the plan's NVML memory caps (Request.measured_here) and hardware/memory.free_bytes on a GPU;
# a plan, an advice and a short train of a torchvision model on the GPU; `pipebench run --quick` and its report.
set -u
source scripts/gpu/env.sh
out=${1:-out}/regression; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv > "$out/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee "$out/versions.txt"
git rev-parse --short HEAD > "$out/commit.txt" 2>/dev/null || true
timed gpu-tests timeout 200 python3 -m pytest -q -m "gpu or multigpu" -p no:cacheprovider tests/test_on_gpus.py
python3 - > "$out/caps.txt" 2>&1 <<'PY'
import torch
from pipebench.hardware.free_memory import free_bytes
from pipebench.hardware.gpus import gpus_by_id, free_memory_caps
from pipebench.request import Request
infos = gpus_by_id([0])
print("free_bytes cuda:0", free_bytes("cuda:0"), "mem_get_info", torch.cuda.mem_get_info(0))
print("infos", infos)
print("free_memory_caps", free_memory_caps(infos))
r = Request(devices=("cuda:0",)).measured_here(infos)
print("measured_here batch", r.batch, "max_memory", r.max_memory)
PY
cat "$out/caps.txt" | cut -c1-300
timed plan-resnet timeout 200 python3 -m pipebench plan --model torchvision.models:resnet18 --input-shape 3,224,224 --num-classes 1000 --stages 1 --device cuda --json "$out/plan-resnet.json"
timed advise-resnet timeout 200 python3 -m pipebench advise --model torchvision.models:resnet18 --input-shape 3,224,224 --num-classes 1000 --stages 1 --device cuda --json "$out/advise-resnet.json"
timed train-resnet timeout 200 python3 -m pipebench train --model torchvision.models:resnet18 --input-shape 3,224,224 --num-classes 1000 --data scripts/gpu/in_memory.py:images --batch 64 --steps 30 --strategy single --save "$out/resnet18.pt" --csv "$out/train.csv"
timed run-quick timeout 300 python3 -m pipebench run --quick --out "$out/run-quick" --fresh
timed report timeout 60 python3 -m pipebench report "$out/run-quick" --out "$out/report"

#!/usr/bin/env bash
# Issue 5 on the 2xH200 machine, from the repository root: the GPU tests, then the busy-GPU
# demonstration (scripts/gpu/busy_gpu.py). Writes ${OUT:-out}/busy-gpu/ and packs it as busy-gpu.tar.gz.
set -u
source scripts/gpu/env.sh
py=${PYTHON:-python3}
dir=${OUT:-out}/busy-gpu
mkdir -p "$dir"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  hostname
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,utilization.gpu --format=csv
  nvidia-smi topo -m
  $py -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
} > "$dir/env.txt" 2>&1
cat "$dir/env.txt"
if [ -z "${SKIP_TESTS:-}" ]; then
  $py -m pytest tests/test_on_gpus.py -v -p no:cacheprovider 2>&1 | tee "$dir/gpu-tests.log"
fi
$py scripts/gpu/busy_gpu.py --out "$dir" ${BUSY_ARGS:-} 2>&1 | tee "$dir/busy-gpu.log"
tar -C "$dir/.." -czf "${OUT:-out}/busy-gpu.tar.gz" busy-gpu

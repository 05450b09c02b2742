#!/usr/bin/env bash
# The benchmark suite on the 2xH200 machine, from the repository root:
#   MODELS=gpt bash scripts/gpu/suite.sh        (one model per call keeps a call under 10 minutes)
#   SWEEP_STRATEGIES=pp-1f1b SWEEP_CHUNKS=2,4,8 also runs those strategies at those micro-batch counts
# Writes ${OUT:-out}/suite-<models>/: env.txt, run.log, the results .csv/.json, profiles and the report,
# and packs them into suite-<models>.tar.gz.
set -u
source scripts/gpu/env.sh
models=${MODELS:-gpt,resnet101}
name=suite-${models//,/-}
dir=${OUT:-out}/$name
mkdir -p "$dir"
py=${PYTHON:-python3}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  hostname
  echo "commit: see the results README (the device copy has no history)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  $py -c "import torch, torchvision, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'torchvision', torchvision.__version__)"
  nproc
} > "$dir/env.txt" 2>&1
cat "$dir/env.txt"
$py -m pipebench run --models "$models" --gpus 0,1 --out "$dir" --micro-batches "${CHUNKS:-auto}" \
    ${STRATEGIES:+--strategies "$STRATEGIES"} ${EXTRA:-} 2>&1 | tee "$dir/run.log"
if [ -n "${SWEEP_STRATEGIES:-}" ]; then  # throughput against micro-batch count, into the same results file
  $py -m pipebench run --models "$models" --gpus 0,1 --out "$dir" --strategies "$SWEEP_STRATEGIES" \
      --micro-batches "${SWEEP_CHUNKS:-2,4,8,16}" --resume 2>&1 | tee -a "$dir/run.log"
fi
if [ -n "${PROBE:-}" ]; then  # DataParallel's slowness on ResNet-101: with and without TF32 + cuDNN autotuning
  mkdir -p "$dir/probe"
  $py scripts/gpu/dataparallel_probe.py "$dir/probe/dataparallel.json" 2>&1 | tee "$dir/probe/dataparallel.log"
fi
$py -m pipebench report "$dir"/*.json --out "$dir/report" 2>&1 | tee "$dir/report.log"
tar -C "$dir/.." -czf "${OUT:-out}/$name.tar.gz" "$name"

#!/usr/bin/env bash
# The foundation issue's GPU measurements, in one go (run on the 2xH200 machine from the repo root):
#   1. profile ResNet-101 at micro-batch 32 on one H200 (target: under 30 s);
#   2. `pipebench plan --model resnet101 --gpus 0,1 --batch 256` (target: slowest stage within 5% of mean);
#   3. the same for the GPT decoder (800M, batch 64) that the strategies issue trains.
# Writes everything under ${OUT:-out}/foundation and packs it into foundation.tar.gz.
set -u
source scripts/gpu/env.sh
dir=${OUT:-out}/foundation
mkdir -p "$dir"
py=${PYTHON:-python3}
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  hostname
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  $py -c "import torch, torchvision, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'torchvision', torchvision.__version__)"
  nproc
} > "$dir/env.txt" 2>&1

run() {  # name, then pipebench arguments; keeps stdout, stderr and wall time
  local name=$1; shift
  local t0=$(date +%s%N)
  $py -m pipebench "$@" > "$dir/$name.txt" 2> "$dir/$name.log"
  local rc=$?
  echo "command: pipebench $* | exit $rc | wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> "$dir/$name.txt"
  cat "$dir/$name.txt"; tail -3 "$dir/$name.log"
}

run resnet101-mb32 plan --model resnet101 --gpus 0 --batch 32 --micro-batches 1 --save-profile "$dir/resnet101-mb32.profile.json"
run resnet101-b256 plan --model resnet101 --gpus 0,1 --batch 256 --json "$dir/resnet101-b256.plan.json" --save-profile "$dir/resnet101-b256.profile.json"
run gpt800m-b64 plan --model gpt --gpus 0,1 --batch 64 --json "$dir/gpt800m-b64.plan.json" --save-profile "$dir/gpt800m-b64.profile.json"
run gpt800m-b64-gpipe plan --model gpt --profile "$dir/gpt800m-b64.profile.json" --gpus 0,1 --schedule gpipe --link-gbps "$(grep -o 'link_gbps": [0-9.]*' "$dir/gpt800m-b64.plan.json" | grep -o '[0-9.]*$')"
tar -C "$dir/.." -czf "${OUT:-out}/foundation.tar.gz" foundation

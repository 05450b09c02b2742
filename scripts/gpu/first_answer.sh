#!/usr/bin/env bash
# Issue 23's targets on one GPU: how long the first answer takes, cold and from the profile cache.
#   bash scripts/gpu/first_answer.sh [OUT]   (from the repository root, on a GPU machine)
# Each command's wall time is printed beside it; logs go to OUT (default: out/first-answer). The cache is
# $PIPEBENCH_CACHE (default /tmp/pipebench-cache, emptied first), so a fidelity run after it reuses it.
set -u
source scripts/gpu/env.sh
out=${1:-out/first-answer}; mkdir -p "$out"
export PIPEBENCH_CACHE=${PIPEBENCH_CACHE:-/tmp/pipebench-cache}
rm -rf "$PIPEBENCH_CACHE"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee "$out/versions.txt"
R="--model resnet101 --batch 256 --precision bf16"
timed advise-resnet101-cold       python3 -m pipebench advise $R --gpus 0
timed advise-resnet101-cached     python3 -m pipebench advise $R --gpus 0
timed run-single-resnet101-cached python3 -m pipebench run --models resnet101 --batch 256 --precision bf16 --strategies single --gpus 0 --out "$out/run1"
L="--model scripts/gpu/llama_1b.py:llama_1b --input-shape 512 --input-dtype int64 --token-range 32000 --batch 16 --precision bf16 --optimizer adamw"
timed advise2-llama1b-cold        python3 -m pipebench advise $L --stages 2 --device cuda:0
timed advise2-llama1b-cached      python3 -m pipebench advise $L --stages 2 --device cuda:0

#!/usr/bin/env bash
# Issue 22 on one GPU: a Hugging Face Llama of about 1.1B parameters from its config (scripts/gpu/llama_1b.py),
# bf16 + AdamW, batch 16 x 512 tokens: plan and advise for 2 stages on the one GPU, then run single and
# compare the measured step and memory with the prediction. Issue 23: the same commands' wall times, cold
# and from the profile cache, and ResNet-101's first answer on one GPU.
#   bash scripts/gpu/decoder_1b.sh [OUT]   (from the repository root, on a GPU machine)
set -u
source scripts/gpu/env.sh
out=${1:-out/decoder-1b}; mkdir -p "$out"
export PIPEBENCH_CACHE="$out/cache"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee "$out/versions.txt"
L="--input-shape 512 --input-dtype int64 --precision bf16 --optimizer adamw"
M=scripts/gpu/llama_1b.py:llama_1b
timed plan2-llama1b-cold    python3 -m pipebench plan --model $M $L --batch 16 --stages 2 --device cuda:0 --micro-batches 2
timed advise2-llama1b       python3 -m pipebench advise --model $M $L --batch 16 --stages 2 --device cuda:0 --micro-batches 2
timed advise2-llama1b-again python3 -m pipebench advise --model $M $L --batch 16 --stages 2 --device cuda:0 --micro-batches 2
timed run-single-llama1b    python3 -m pipebench run --models $M $L --batch 16 --strategies single --gpus 0 --out "$out/run-llama"
[ -n "${DECODER_ONLY:-}" ] && exit 0
timed advise-resnet101-cold python3 -m pipebench advise --model resnet101 --batch 256 --precision bf16 --gpus 0
timed run-single-resnet101  python3 -m pipebench run --models resnet101 --batch 256 --precision bf16 --strategies single --gpus 0 --out "$out/run-resnet"
cp "$out"/run-*/*.csv "$out/" 2>/dev/null

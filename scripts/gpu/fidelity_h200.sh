#!/usr/bin/env bash
# Issue 24's fidelity on one GPU: `run --strategies single` for five models of different families (a ResNet,
# a ViT, the zoo's GPT, a Hugging Face Llama from its config, timm's ConvNeXt), each in the precisions
# given (default: tf32 and bf16), then `python -m pipebench.bench.predict.fidelity` over the rows: step and
# memory error of each prediction against its measurement.
#   bash scripts/gpu/fidelity_h200.sh [OUT] [PRECISION ...]   (from the repository root, on a GPU machine)
set -u
source scripts/gpu/env.sh
out=${1:-out/fidelity-h200}; shift || true
precisions=${*:-tf32 bf16}
mkdir -p "$out"
export PIPEBENCH_CACHE=${PIPEBENCH_CACHE:-/tmp/pipebench-cache}  # outside OUT: many small files
python3 -c "import torch, transformers, timm; print('torch', torch.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, torch.cuda.get_device_name(0))" | tee "$out/versions.txt"
S="--strategies single --gpus 0 --steps 10 --warmup 3 --resume --out $out"  # one results file for all
for p in $precisions; do
  timed "resnet101-$p"  python3 -m pipebench run --models resnet101 --batch 256 --precision $p $S
  timed "vit_b_16-$p"   python3 -m pipebench run --models vit_b_16 --batch 128 --precision $p $S
  timed "gpt125m-$p"    python3 -m pipebench run --models gpt --flavour 125m --batch 32 --precision $p $S
  timed "llama1b-$p"    python3 -m pipebench run --models scripts/gpu/llama_1b.py:llama_1b --input-shape 512 \
                          --input-dtype int64 --token-range 32000 --batch 16 --optimizer adamw --precision $p $S
  timed "convnext_s-$p" python3 -m pipebench run --models timm.models:convnext_small --input-shape 3,224,224 \
                          --batch 128 --precision $p $S
done
python3 -m pipebench.bench.predict.fidelity "$out" --markdown | tee "$out/fidelity.md"

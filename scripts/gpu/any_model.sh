#!/usr/bin/env bash
# Issue 12 on the 2xH200 machine, from the repository root. PART=a: the GPU tests, then torchvision's own
# resnet101 (through the graph) against the zoo's flattened ResNet-101 at batch 256. PART=b: a 1.1B
# Hugging Face Llama, pipebench's plan against the parameter-midpoint split. Writes ${OUT:-out}/any-model/.
set -u
source scripts/gpu/env.sh
py=${PYTHON:-python3}
dir=${OUT:-out}/any-model
mkdir -p "$dir"
if [ "${PART:-a}" = a ] || [ "${PART:-a}" = ab ]; then
  {
    date -u +"%Y-%m-%dT%H:%M:%SZ"; hostname
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
    $py -c "import torch, sys, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
  } > "$dir/env.txt" 2>&1
  cat "$dir/env.txt"
  [ -z "${SKIP_TESTS:-}" ] && $py -m pytest tests/test_on_gpus.py -v -p no:cacheprovider 2>&1 | tee "$dir/gpu-tests.log"
  common="--gpus 0,1 --batch 256 --strategies ${STRATEGIES:-single,pp-1f1b,pp-interleaved} --micro-batches ${CHUNKS_A:-auto} --out $dir --steps 5"
  [ -z "${SKIP_ZOO:-}" ] && $py -m pipebench run --models resnet101 $common 2>&1 | tee "$dir/zoo-resnet101.log"
  $py -m pipebench run --models torchvision.models:resnet101 --input-shape 3,224,224 $common 2>&1 | tee "$dir/torchvision-resnet101.log"
  $py -m pipebench report "$dir"/*.json --out "$dir/report" 2>&1 | tail -30
fi
if [ "${PART:-a}" = b ] || [ "${PART:-a}" = ab ]; then
  $py scripts/gpu/split_against.py --model scripts/gpu/llama_1b.py:llama_1b --batch 32 --micro-batches ${CHUNKS:-4,8} \
    --set input_shape=512 --set input_dtype=int64 --set token_range=32000 --out "$dir/llama-1b" 2>&1 | tee "$dir/llama-1b.log"
fi

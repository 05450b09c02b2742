#!/usr/bin/env bash
# Issue 38's broad fidelity on one H200: `run --strategies single` for 13 models whose families no earlier
# fidelity run measured (torchvision, timm, and Hugging Face from configs), in one precision per call, then
# `python -m pipebench.bench.predict.fidelity` over the rows: step and memory error against the measurement, and the
# share of measured steps inside the printed interval (its coverage).
#   bash scripts/gpu/fidelity_broad_h200.sh OUT PRECISION   (from the repository root; about 8 minutes; the two
#   runs capped at VISION_CAP and TEXT_CAP seconds, default 330 and 240: rows of finished models are kept;
#   VISION and TEXT, comma-separated, name other models of the lists below, in the order to run them;
#   VISION_BATCH and TEXT_BATCH, default 64 images and 16 sequences of 256 tokens, other batches)
# The profiles come back as OUT/profiles.tgz (the launch-bound analysis reads their CPU launch times).
set -u
source scripts/gpu/env.sh
out=${1:?usage: fidelity_broad_h200.sh OUT PRECISION}; p=${2:?precision: tf32 or bf16}
mkdir -p "$out"
export PIPEBENCH_CACHE=/tmp/pipebench-cache  # outside OUT: many small files
python3 -c "import torch, transformers, timm; print('torch', torch.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, torch.cuda.get_device_name(0))" | tee "$out/versions.txt"
S="--strategies single --gpus 0 --steps 10 --warmup 3 --rounds 2 --optimizer adamw --precision $p --resume --out $out"
tv=torchvision.models
timed "vision-$p" timeout ${VISION_CAP:-330} python3 -m pipebench run --input-shape 3,224,224 --num-classes 1000 --batch ${VISION_BATCH:-64} $S \
  --models ${VISION:-$tv:efficientnet_b0,$tv:mobilenet_v3_large,$tv:regnet_y_1_6gf,$tv:swin_t,$tv:densenet121,$tv:shufflenet_v2_x1_0,timm.models:mixer_b16_224,timm.models:poolformer_s12}
m=scripts/gpu/broad_models.py
timed "text-$p" timeout ${TEXT_CAP:-240} python3 -m pipebench run --input-shape 256 --batch ${TEXT_BATCH:-16} $S \
  --models ${TEXT:-$m:bert_base_classifier,$m:t5_small,$m:qwen3_0_6b,$m:mistral_small,$m:pythia_410m}
python3 -m pipebench.bench.predict.fidelity "$out" --markdown | tee "$out/fidelity.md"
(cd "$out" && find . -name '*-profiles' -type d -prune -print0 | tar -czf profiles.tgz --null -T -)
find "$out" -name '*-profiles' -type d -prune -exec rm -rf {} +  # deep folders do not come back

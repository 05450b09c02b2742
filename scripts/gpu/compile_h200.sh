#!/usr/bin/env bash
# Issue 39 on one H200: eager and --compile default side by side in one `run --strategies single` each, for
# the zoo's GPT 800M (bf16 + AdamW, batch 64), a Pythia-1B-shaped decoder (scripts/gpu/pythia_1b.py, bf16 +
# AdamW, batch 16 x 1024 tokens) and torchvision's ResNet-50 (bf16 + AdamW, batch 256); then, per model, the
# compiled/eager step ratio, the compiled step predicted against measured, and the compile seconds.
#   bash scripts/gpu/compile_h200.sh OUT   (from the repository root; about 8 minutes, each model capped)
set -u
source scripts/gpu/env.sh
out=${1:?usage: compile_h200.sh OUT}; mkdir -p "$out"
export PIPEBENCH_CACHE="$out/cache" TORCHINDUCTOR_CACHE_DIR="$out/inductor"   # cold: compile seconds as a first run
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee "$out/versions.txt"
C="--strategies single --gpus 0 --compile eager,default --precision bf16 --optimizer adamw --steps 10 --warmup 2"
timed gpt800m   timeout 170 python3 -m pipebench run --models gpt --batch 64 $C --out "$out/gpt800m"
timed pythia1b  timeout 170 python3 -m pipebench run --models scripts/gpu/pythia_1b.py:pythia_1b --input-shape 1024 \
    --input-dtype int64 --token-range 50304 --batch 16 $C --out "$out/pythia1b"
timed resnet50  timeout 170 python3 -m pipebench run --models torchvision.models:resnet50 --input-shape 3,224,224 \
    --num-classes 1000 --batch 256 $C --out "$out/resnet50"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import sys
from pathlib import Path
from pipebench.bench import results
out = Path(sys.argv[1])
for name in ("gpt800m", "pythia1b", "resnet50"):
    files = sorted((out / name).glob("*.json"))
    rows = [r for f in files for r in results.load(f)] if files else []
    eager = next((r for r in rows if r.compile is None and r.status == "ok"), None)
    compiled = next((r for r in rows if r.compile == "default"), None)
    if eager is None or compiled is None or compiled.status != "ok":
        why = compiled.reason if compiled is not None else "no compiled row"
        print(f"{name}: eager {'ok' if eager else 'missing'}, compiled {compiled.status if compiled else 'missing'}: {why}")
        continue
    pred = compiled.predicted_step_ms
    error = f"{(pred - compiled.step_ms) / compiled.step_ms * 100:+.1f}%" if pred else "n/a"
    print(f"{name}: eager {eager.step_ms:.1f} ms, compiled {compiled.step_ms:.1f} ms: compiled/eager speed "
          f"{eager.step_ms / compiled.step_ms:.3f}x; compiled predicted {pred or float('nan'):.1f} ms ({error}); "
          f"compile {compiled.compile_s:.1f} s, {compiled.graph_breaks} graph break(s); "
          f"eager predicted {eager.predicted_step_ms or float('nan'):.1f} ms")
PY
cp "$out"/*/*.csv "$out/" 2>/dev/null

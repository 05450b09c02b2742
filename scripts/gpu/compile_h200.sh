#!/usr/bin/env bash
# Issue 39 on one H200: eager and --compile default side by side in one `run --strategies single` each, for
# the zoo's GPT 800M (bf16 + AdamW, batch 64), a Pythia-1B-shaped decoder (scripts/gpu/pythia_1b.py, bf16 +
# AdamW, batch 16 x 1024 tokens) and torchvision's ResNet-50 (bf16 + AdamW, batch 256); then, per model, the
# compiled/eager step ratio, the compiled step predicted against measured, and the compile seconds.
#   bash scripts/gpu/compile_h200.sh OUT [MODEL ...]   (from the repository root; MODEL: gpt800m, pythia1b,
#   resnet50, default all three; ROUNDS=N for N interleaved rounds, default 2; each model capped at CAP seconds,
#   default 170; about 3 minutes a model)
set -u
source scripts/gpu/env.sh
out=${1:?usage: compile_h200.sh OUT [MODEL ...]}; shift; mkdir -p "$out"
want=" ${*:-gpt800m pythia1b resnet50} "
cap=${CAP:-170}
export PIPEBENCH_CACHE=/tmp/pipebench-cache TORCHINDUCTOR_CACHE_DIR=/tmp/inductor   # outside OUT: many files
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee "$out/versions.txt"
C="--strategies single --gpus 0 --compile eager,default --precision bf16 --optimizer adamw --steps 10 --warmup 2 --rounds ${ROUNDS:-2}"
[[ $want == *" gpt800m "* ]] && timed gpt800m timeout $cap python3 -m pipebench run --models gpt --batch 64 $C --out "$out/gpt800m"
[[ $want == *" pythia1b "* ]] && timed pythia1b timeout $cap python3 -m pipebench run --models scripts/gpu/pythia_1b.py:pythia_1b --input-shape 1024 \
    --input-dtype int64 --token-range 50304 --batch 16 $C --out "$out/pythia1b"
[[ $want == *" resnet50 "* ]] && timed resnet50 timeout $cap python3 -m pipebench run --models torchvision.models:resnet50 --input-shape 3,224,224 \
    --num-classes 1000 --batch 256 $C --out "$out/resnet50"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import sys
from pathlib import Path
from pipebench.bench.store import results
out = Path(sys.argv[1])
for name in ("gpt800m", "pythia1b", "resnet50"):
    if not (out / name).is_dir():
        continue
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
for d in "$out"/*/; do n=$(basename "$d"); cp "$d"/*.csv "$out/$n.csv"; cp "$d"/*.json "$out/$n.json"; done 2>/dev/null
find "$out" -name '*-profiles' -type d -prune -exec rm -rf {} +  # deep folders do not come back

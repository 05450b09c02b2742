#!/usr/bin/env bash
# The first machine (issue 40) and train's speed (issue 37) on one GPU, from the repository root:
#   PART=a bash scripts/gpu/first_machine_h200.sh OUT   # `pipebench run` with no arguments, its report, the GPU tests
#   PART=b bash scripts/gpu/first_machine_h200.sh OUT   # train's samples/s against run's, same case, one call:
#          ResNet-50 at batch 256 from an in-memory data set, a Pythia-1B-shaped decoder from a token file
set -u
source scripts/gpu/env.sh
out=${1:-out}/first-machine; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee "$out/versions.txt"
case ${PART:-a} in
a)
  timed run-noargs timeout 420 python3 -m pipebench run --out "$out/run-noargs" --fresh
  timed report timeout 60 python3 -m pipebench report "$out/run-noargs"
  python3 - "$out/run-noargs" <<'PY' | tee "$out/statuses.txt"
import collections, csv, pathlib, sys
rows = [r for p in pathlib.Path(sys.argv[1]).glob("*.csv") for r in csv.DictReader(open(p))]
print("rows", len(rows), dict(collections.Counter(r.get("status", "?") for r in rows)))
for r in rows:
    print(r.get("model"), r.get("strategy"), r.get("status"), (r.get("reason") or "")[:160])
PY
  timed gpu-tests timeout 120 python3 -m pytest -q -m "gpu or multigpu" -p no:cacheprovider
  ;;
b)
  M="--model torchvision.models:resnet50 --input-shape 3,224,224 --num-classes 1000 --batch 256 --precision bf16 --optimizer adamw"
  timed resnet50-run timeout 200 python3 -m pipebench run ${M/--model/--models} --strategies single --out "$out/resnet50-run" --fresh
  timed resnet50-train timeout 200 python3 -m pipebench train $M --strategy single --data scripts/gpu/in_memory.py:images \
      --steps 40 --log-every 10 --csv "$out/resnet50-train.csv"
  T="--model scripts/gpu/pythia_1b.py:pythia_1b --input-shape 1024 --input-dtype int64 --token-range 50304 --batch 16 --precision bf16 --optimizer adamw"
  python3 -c "import numpy as np; np.random.default_rng(0).integers(0, 50304, 16*1024*60, dtype=np.uint16).tofile('$out/tokens.bin')"
  timed pythia-run timeout 200 python3 -m pipebench run ${T/--model/--models} --strategies single --out "$out/pythia-run" --fresh
  timed pythia-train timeout 200 python3 -m pipebench train $T --strategy single --data tokens:"$out/tokens.bin" \
      --steps 40 --log-every 10 --csv "$out/pythia-train.csv"
  python3 - "$out" <<'PY' | tee "$out/train-vs-run.txt"
import csv, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
for name in ("resnet50", "pythia"):
    runs = [r for p in (out / f"{name}-run").glob("*.csv") for r in csv.DictReader(open(p))]
    run_sps = float(runs[0]["samples_per_s"]) if runs and runs[0].get("samples_per_s") else float("nan")
    steps = list(csv.DictReader(open(out / f"{name}-train.csv")))[10:]  # after the warm-up
    train_sps = statistics.median(float(s["samples_per_s"]) for s in steps) if steps else float("nan")
    print(f"{name}: run {run_sps:.1f} samples/s, train {train_sps:.1f} samples/s (median of steps 11-40), train/run {train_sps / run_sps:.3f}")
PY
  ;;
esac

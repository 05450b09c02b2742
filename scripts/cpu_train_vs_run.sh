#!/usr/bin/env bash
# Does `pipebench train`'s step cost what `pipebench run` measured for the same case? On the CPU (2 gloo
# processes), side by side in one call, from the repository root:
#   bash scripts/cpu_train_vs_run.sh OUT
# The case: tests/fixtures/byte_gpt2.py's gpt2_small on the standard library's bytes (scripts/stdlib_bytes.py),
# batch 32 x 128 tokens, AdamW, fp32, with single and pp-1f1b. run times its repeated synthetic batch; train
# reads the token file through its DataLoader. train's figure is its median samples/s over steps 11-40.
set -eu
out=${1:-out}/cpu-train-vs-run; mkdir -p "$out"
py=${PYTHON:-python3}
$py -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee "$out/versions.txt"
$py scripts/stdlib_bytes.py "$out/train.bin" "$out/held.bin"
M="tests/fixtures/byte_gpt2.py:gpt2_small"
C="--input-shape 128 --input-dtype int64 --batch 32 --precision fp32 --optimizer adamw --device cpu --stages 2"
for s in single pp-1f1b; do
  $py -m pipebench run --models $M $C --strategies $s --steps 20 --warmup 3 --rounds 2 --out "$out/$s-run" --fresh \
      | tee "$out/$s-run.txt"
  $py -m pipebench train --model $M $C --strategy $s --data tokens:"$out/train.bin" --steps 40 --log-every 10 \
      --csv "$out/$s-train.csv" | tee "$out/$s-train.txt"
done
$py - "$out" <<'PY' | tee "$out/train-vs-run.txt"
import csv, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
for name in ("single", "pp-1f1b"):
    runs = [r for p in (out / f"{name}-run").glob("*.csv") for r in csv.DictReader(open(p))]
    run_sps = float(runs[-1]["samples_per_s"]) if runs and runs[-1].get("samples_per_s") else float("nan")
    steps = list(csv.DictReader(open(out / f"{name}-train.csv")))[10:]  # after the warm-up
    train_sps = statistics.median(float(s["samples_per_s"]) for s in steps) if steps else float("nan")
    bounds = runs[-1].get("bounds", "") if runs else ""
    print(f"{name}: run {run_sps:.1f} samples/s (bounds {bounds}), train {train_sps:.1f} samples/s "
          f"(median of steps 11-40), train/run {train_sps / run_sps:.3f}")
PY

#!/usr/bin/env bash
# Does `pipebench train`'s step cost what `pipebench run` measured for the same case? On the CPU (2 gloo
# processes standing in for devices, one thread each), side by side in one call, from the repository root:
#   bash scripts/cpu_train_vs_run.sh OUT          (PYTHON=.venv/bin/python to pick the interpreter)
# The cases, each with single and pp-1f1b, the same model, batch, precision, optimizer and threads:
#   convnet  the recipe's ConvNet, batch 64, SGD fp32, on scikit-learn's digits in MNIST's layout
#            (scripts/digits_mnist.py): run reads them through --data-dir, train through --data mnist:DIR;
#   gpt2     tests/fixtures/byte_gpt2.py's gpt2_small, batch 32 x 128 byte tokens, AdamW fp32, on the
#            standard library's bytes (scripts/stdlib_bytes.py); run times a repeated synthetic batch.
# run: 100 (convnet) or 20 (gpt2) timed steps after 3 warm-up, 2 rounds; its samples/s is the batch over the
# mean step. train: 200 (convnet: 9 epochs of the digits) or 40 (gpt2) steps; its figures from step 11 on: "step" the batch over the mean step time it logs
# (trainer.step alone, as run times), "wall" the batch over the mean wall-clock step (the CSV's time_s:
# data loading, the stop check, logging included). The load average is noted before each command.
set -eu
out=${1:-out}/cpu-train-vs-run; mkdir -p "$out"
py=${PYTHON:-python3}
$py -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee "$out/versions.txt"
$py scripts/stdlib_bytes.py "$out/train.bin" "$out/held.bin"
$py scripts/digits_mnist.py "$out/digits"
load() { echo "$1: load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }
COMMON="--precision fp32 --device cpu --cpu-processes 2"
GPT2="tests/fixtures/byte_gpt2.py:gpt2_small"
for case in convnet gpt2; do
  if [ $case = convnet ]; then
    RUN="--models convnet --batch 64 --optimizer sgd --data-dir $out/digits"; RUNSTEPS=100; STEPS=200
    TRAIN="--model convnet --batch 64 --optimizer sgd --lr 0.01 --data mnist:$out/digits"
  else
    RUN="--models $GPT2 --input-shape 128 --input-dtype int64 --batch 32 --optimizer adamw"; RUNSTEPS=20; STEPS=40
    TRAIN="--model $GPT2 --input-shape 128 --input-dtype int64 --batch 32 --optimizer adamw --lr 0.003 --data tokens:$out/train.bin"
  fi
  for s in single pp-1f1b; do
    load "$case $s run"
    $py -m pipebench run $RUN $COMMON --strategies $s --steps $RUNSTEPS --warmup 3 --rounds 2 --out "$out/$case-$s-run" \
        | tee "$out/$case-$s-run.txt"
    load "$case $s train"
    $py -m pipebench train $TRAIN $COMMON --strategy $s --steps $STEPS --log-every $((STEPS / 4)) \
        --csv "$out/$case-$s-train.csv" | tee "$out/$case-$s-train.txt"
  done
done
load end
$py - "$out" <<'PY' | tee "$out/train-vs-run.txt"
import csv, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
for case, batch in (("convnet", 64), ("gpt2", 32)):
    for name in ("single", "pp-1f1b"):
        runs = [r for p in (out / f"{case}-{name}-run").glob("*.csv") for r in csv.DictReader(open(p))]
        run = runs[-1]
        run_sps = float(run["samples_per_s"])
        steps = list(csv.DictReader(open(out / f"{case}-{name}-train.csv")))
        timed = steps[10:]
        step_sps = batch / statistics.fmean(batch / float(s["samples_per_s"]) for s in timed)
        wall_sps = batch * len(timed) / (float(timed[-1]["time_s"]) - float(steps[9]["time_s"]))
        print(f"{case} {name}: run {run_sps:.1f} samples/s (micro-batches {run.get('micro_batches')}, bounds "
              f"{run.get('bounds')}); train step {step_sps:.1f} ({step_sps / run_sps:.3f} of run), "
              f"wall {wall_sps:.1f} ({wall_sps / run_sps:.3f} of run)")
PY

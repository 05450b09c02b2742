#!/usr/bin/env bash
# Single-process strategies on the 2xH200 machine from the committed foundation plans.
set -u
source scripts/gpu/env.sh
dir=${OUT:-out}/strategies
mkdir -p "$dir"
plans=results/2026-11-29-2xH200-foundation
for name in resnet101-b256 gpt800m-b64; do
  python3 scripts/gpu/time_strategies.py "$plans/$name.plan.json" --csv "$dir/$name.csv" 2>&1 | tee "$dir/$name.txt"
done

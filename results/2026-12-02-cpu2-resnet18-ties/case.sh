#!/usr/bin/env bash
# The ResNet-18 case as a user runs it, ROUNDS times: advise (profiled afresh), then its
# "check it with" command exactly as printed. Run from the repository root on an idle machine:
#   bash results/2026-12-02-cpu2-resnet18-ties/case.sh OUT
set -euo pipefail
out=$1; rounds=${ROUNDS:-3}
for k in $(seq 1 "$rounds"); do
    mkdir -p "$out/round$k"
    pipebench advise --model torchvision.models:resnet18 --input-shape 3,64,64 --batch 16 --stages 2 --device cpu \
        --fresh > "$out/round$k/advise.txt" 2> "$out/round$k/advise.log"
    check=$(sed -n 's/.*check it with: //p' "$out/round$k/advise.txt")
    echo "# round $k: $check" | tee "$out/round$k/check.txt"
    (cd "$out/round$k" && eval "$check --out ." >> check.txt 2> check.log)
    tail -3 "$out/round$k/check.txt"
done

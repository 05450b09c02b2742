#!/usr/bin/env bash
# scripts/cpu_fidelity.sh's commands, each `pipebench run` under the shared CPU lock (so other runs wait
# between them, not for the whole measurement).
set -euo pipefail
out=$1
python=.venv/bin/python
lock="flock /tmp/pipebench-cpu.lock"
steps=6; seconds=3
strategies=single,dataparallel,ddp,fsdp,pp-gpipe,pp-1f1b,pp-zb,pp-zbv
for k in 1 2 3; do
    round="$out/round$k"
    echo "# round $k: $round $(date -u +%H:%M:%S)"
    $lock "$python" -m pipebench run --quick --fresh --steps "$steps" --min-seconds "$seconds" --warmup 2 --out "$round"
    echo "# resnet18 $(date -u +%H:%M:%S)"
    $lock "$python" -m pipebench run --resume --fresh --steps "$steps" --min-seconds "$seconds" --warmup 2 --out "$round" \
        --models torchvision.models:resnet18 --input-shape 3,64,64 --batch 16 --strategies "$strategies"
    echo "# gpt2 $(date -u +%H:%M:%S)"
    $lock "$python" -m pipebench run --resume --fresh --steps "$steps" --min-seconds "$seconds" --warmup 2 --out "$round" \
        --models tests/fixtures/hf_models.py:gpt2 --input-shape 16 --input-dtype int64 --token-range 128 --batch 16 \
        --strategies "$strategies"
    uptime
done
echo "# done $(date -u +%H:%M:%S)"

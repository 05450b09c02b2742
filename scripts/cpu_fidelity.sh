#!/usr/bin/env bash
# How good the CPU predictions are, in one command: every strategy of the quick suite's models (gpt and
# resnet101, tiny, batch 8), of a torchvision ResNet-18 and of a Hugging Face GPT-2, each profiled afresh
# (the gloo link, the cores' contention and the pipeline runtime's cost per operation timed again), then
# bench/predict/fidelity.py's figures. Run it from the repository root on an idle machine: every timing,
# the probes' too, measures the load of whatever else runs. All of it runs ROUNDS times (default 3), each
# round in OUT/round<k>, minutes apart: a CPU stand-in's speed drifts with the host's other load (up to
# 1.9x within minutes on our VM), and fidelity.py judges each case by the medians of its rounds.
#
#   bash scripts/cpu_fidelity.sh [OUT]        # OUT: the results folder (default pipebench-results/cpu-fidelity)
set -euo pipefail
out=${1:-pipebench-results/cpu-fidelity}
python=${PYTHON:-python}
# Each case is timed as advise's "check it with" times it on the CPU (bench/cli/advise.py CPU_CHECK: 6 steps
# at the least, and more until 3 s have passed: a case's fastest step is judged, and bursts of the host's
# load last 0.2-1.5 s); $STEPS and $MIN_SECONDS change it.
check() { "$python" -c "from pipebench.bench.cli.advise import CPU_CHECK; print(CPU_CHECK['$1'])"; }
steps=${STEPS:-$(check steps)}
seconds=${MIN_SECONDS:-$(check min_seconds)}
strategies=single,dataparallel,ddp,fsdp,pp-gpipe,pp-1f1b,pp-zb,pp-zbv
rounds=${ROUNDS:-3}
folders=()
for k in $(seq 1 "$rounds"); do
    round="$out/round$k"
    folders+=("$round")
    echo "# round $k of $rounds: $round"
    "$python" -m pipebench run --quick --fresh --steps "$steps" --min-seconds "$seconds" --warmup 2 --out "$round"
    "$python" -m pipebench run --resume --fresh --steps "$steps" --min-seconds "$seconds" --warmup 2 --out "$round" \
        --models torchvision.models:resnet18 --input-shape 3,64,64 --batch 16 --strategies "$strategies"
    "$python" -m pipebench run --resume --fresh --steps "$steps" --min-seconds "$seconds" --warmup 2 --out "$round" \
        --models tests/fixtures/hf_models.py:gpt2 --input-shape 16 --input-dtype int64 --token-range 128 --batch 16 \
        --strategies "$strategies"
done
"$python" -m pipebench.bench.predict.fidelity --markdown "${folders[@]}"

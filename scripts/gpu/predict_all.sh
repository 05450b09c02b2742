#!/usr/bin/env bash
# Issue 13 on the 2xH200 machine, from the repository root: every strategy predicted by `pipebench advise`
# from one profile, then every strategy run by `pipebench run` from that same profile, so the report sets
# each measured step beside its prediction. One model per call (a call has 10 minutes):
#   MODEL=resnet101 BATCH=256 PART=advise bash scripts/gpu/predict_all.sh   # profile + predictions
#   MODEL=resnet101 BATCH=256 PART=run bash scripts/gpu/predict_all.sh      # run every strategy on it
# Profiles stay in out/predict-all/profiles on the machine between calls; everything comes back as one
# tarball, $OUT/predict-<model>.tgz.
set -u
source scripts/gpu/env.sh
py=${PYTHON:-python3}
model=${MODEL:-resnet101}
batch=${BATCH:-256}
flavour=${FLAVOUR:-$($py -c "from pipebench import models as z; print({i.name: i.default_flavour for i in z.list_models()}['$model'])")}
dir=${PREDICT_DIR:-out/predict-all}
mkdir -p "$dir/profiles" "$dir/results"
profile="$dir/profiles/$model-$flavour-b$batch.profile.json"
if [ "${PART:-advise}" = advise ]; then
  {
    date -u +"%Y-%m-%dT%H:%M:%SZ"; hostname
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
    $py -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  } > "$dir/env.txt" 2>&1
  cat "$dir/env.txt"
  $py -m pipebench advise --model "$model" --batch "$batch" --gpus 0,1 --micro-batches "${CHUNKS:-1,2,4,8,16}" \
    --save-profile "$profile" --json "$dir/advise-$model.json" 2>&1 | tee "$dir/advise-$model.txt"
fi
if [ "${PART:-advise}" = run ]; then
  $py -m pipebench run --models "$model" --batch "$batch" --gpus 0,1 --strategies "${STRATEGIES:-single,dataparallel,ddp,modelparallel,pipeline,pp-gpipe,pp-1f1b,pp-interleaved,pp-zb,pp-zbv}" \
    --profiles "$dir/profiles" --out "$dir/results" --steps "${STEPS:-5}" --resume 2>&1 | tee "$dir/run-$model.log"
  $py -m pipebench report "$dir"/results/*.json --out "$dir/report" 2>&1 | tee "$dir/report-$model.txt" | tail -40
fi
tar czf "${OUT:-out}/predict-$model-${PART:-advise}.tgz" -C "$dir" . 2>/dev/null

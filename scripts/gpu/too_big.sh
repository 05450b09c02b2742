#!/usr/bin/env bash
# Issue 14 on the 2xH200 machine, from the repository root, one part per call (a call has 10 minutes):
#   PART=big  bash scripts/gpu/too_big.sh   # GPT 8B, bf16 + AdamW: single and DDP predicted out of memory,
#                                         # pp-1f1b, pp-zbv, pp-interleaved, fsdp, device-map run, single tried anyway
#   PART=lab  bash scripts/gpu/too_big.sh   # the seed's lab: --gpu-memory 10GiB, the seed's ConvNet (TF32 SGD) and
#                                         # GPT 800M (bf16 + AdamW, --checkpoint auto); RESNET=1 adds ResNet-101 bf16
#   PART=bf16 MODEL=gpt BATCH=64 bash scripts/gpu/too_big.sh   # GPT 800M (or ResNet-101) again in bf16 + AdamW
#   PART=lab2 bash scripts/gpu/too_big.sh   # the lab's GPT and ResNet-101's fsdp again after the fixes they led to
#   PART=one GPUS=0 bash scripts/gpu/too_big.sh  # what one H200 can show: the 8B and 800M-at-10GiB single cases
#                                         # predicted out of memory and tried anyway, the bf16 baselines; its
#                                         # profiles are the ones the 2-GPU parts reuse (same counts)
# Everything lands in $DIR (default out/too-big) and comes back as $OUT/too-big-<part>.tgz. Profiles are
# reused from $DIR/profiles when there (carry them back in for a later call).
set -u
source scripts/gpu/env.sh
py=${PYTHON:-python3}
dir=${DIR:-out/too-big}
part=${PART:-big}
mkdir -p "$dir/profiles" "$dir/logs"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"; hostname
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  $py -c "import torch, sys, accelerate; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'accelerate', accelerate.__version__)"
} > "$dir/env-$part.txt" 2>&1
cat "$dir/env-$part.txt"
bf16="--precision bf16 --optimizer adamw"
run() {  # run NAME LIMIT_S ARGS...: one pipebench run, its log kept, stopped at LIMIT_S
  local name=$1 limit=$2; shift 2
  echo "+ pipebench run $*" | tee "$dir/logs/$name.log"
  timeout -s INT "$limit" $py -m pipebench run --gpus "${GPUS:-0,1}" --profiles "$dir/profiles" --resume "$@" 2>&1 | tee -a "$dir/logs/$name.log"
}
case "$part" in
  big)
    run big 420 --models gpt --flavour 8b --batch 16 $bf16 --micro-batches 2,8 --repeats 3 --steps 3 --warmup 1 --out "$dir/big" \
      --strategies single,ddp,pp-1f1b,fsdp,pp-zbv,device-map,pp-interleaved
    run big-try 90 --models gpt --flavour 8b --batch 16 $bf16 --micro-batches 2,8 --repeats 3 --steps 3 --warmup 1 --out "$dir/big-try" \
      --strategies single --try-anyway
    ;;
  big2)  # the 8B cases a first call had no time for (each 8B case spends about 2 minutes building)
    run big2 "${LIMIT:-330}" --models gpt --flavour 8b --batch 16 $bf16 --micro-batches 8 --repeats 3 --steps 3 --warmup 1 \
      --out "$dir/big2" --strategies "${STRATEGIES:-pp-zbv,pp-interleaved,pp-zb}"
    ;;
  lab)  # the seed's lab at 10 GiB a GPU; RESNET=1 adds ResNet-101 in bf16 + AdamW (the bf16 part's second model)
    run lab-convnet 100 --models convnet --gpu-memory 10GiB --out "$dir/lab" --steps 5 \
      --strategies single,dataparallel,ddp,fsdp,device-map,modelparallel,pipeline,pp-1f1b,pp-zbv
    run lab-gpt "${LAB_LIMIT:-200}" --models gpt --flavour 800m --batch 64 $bf16 --checkpoint auto --gpu-memory 10GiB \
      --micro-batches 16 --out "$dir/lab" --steps 3 --warmup 1 --strategies single,ddp,fsdp,pp-1f1b,pp-interleaved
    run lab-gpt-device-map 60 --models gpt --flavour 800m --batch 64 $bf16 --gpu-memory 10GiB --micro-batches 16 \
      --out "$dir/lab" --steps 3 --warmup 1 --strategies device-map
    if [ -n "${RESNET:-}" ]; then
      run bf16-resnet101 "${RESNET_LIMIT:-150}" --models resnet101 --batch 256 $bf16 --micro-batches 4 --out "$dir/bf16" \
        --steps 5 --strategies single,ddp,fsdp,pp-1f1b,pp-zbv
    fi
    ;;
  lab2)  # after the first lab: the plans' 10% margin under --gpu-memory, auto recompute for FSDP, FSDP's
         # BatchNorm in fp32 (ResNet-101's fsdp row failed in bf16)
    run lab-gpt2 "${LAB2_LIMIT:-150}" --models gpt --flavour 800m --batch 64 $bf16 --checkpoint auto --gpu-memory 10GiB --micro-batches 16 \
      --out "$dir/lab2" --steps 3 --warmup 1 --strategies fsdp,pp-1f1b,pp-interleaved
    run bf16-resnet101-fsdp 60 --models resnet101 --batch 256 $bf16 --micro-batches 4 --out "$dir/bf16" --steps 5 \
      --strategies single,ddp,fsdp
    ;;
  one)
    run one-8b 300 --models gpt --flavour 8b --batch 16 $bf16 --micro-batches 2,8 --repeats 3 --steps 3 --warmup 1 \
      --out "$dir/one" --strategies single
    run one-8b-try 90 --models gpt --flavour 8b --batch 16 $bf16 --micro-batches 2,8 --repeats 3 --steps 3 --warmup 1 \
      --out "$dir/one-try" --strategies single --try-anyway
    run one-800m 120 --models gpt --batch 64 $bf16 --micro-batches 2,4,8,16 --out "$dir/one" --strategies single
    run one-800m-lab 60 --models gpt --batch 64 $bf16 --micro-batches 2,4,8,16 --gpu-memory 10GiB --out "$dir/one-try" \
      --strategies single --try-anyway
    run one-resnet 150 --models resnet101 --batch 256 $bf16 --micro-batches 2,4,8 --out "$dir/one" --strategies single
    ;;
  bf16)  # every strategy (hybrid needs 4 GPUs) at one micro-batch count, for issue 13's check in bf16
    model=${MODEL:-gpt}
    run "bf16-$model" "${LIMIT:-520}" --models "$model" --batch "${BATCH:-64}" $bf16 --micro-batches "${CHUNKS:-8}" \
      --out "$dir/bf16" --steps 5 \
      --strategies "${STRATEGIES:-single,ddp,dataparallel,fsdp,device-map,modelparallel,pipeline,pp-gpipe,pp-1f1b,pp-interleaved,pp-zb,pp-zbv}"
    ;;
esac
$py -m pipebench report $(ls "$dir"/*/*.json 2>/dev/null | grep -v profiles/) --out "$dir/report" \
  > "$dir/logs/report-$part.txt" 2>&1
tail -60 "$dir/logs/report-$part.txt"
tar czf "${OUT:-out}/too-big-$part.tgz" -C "$dir" . 2>/dev/null

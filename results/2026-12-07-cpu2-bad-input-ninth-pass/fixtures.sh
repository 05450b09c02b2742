# Fixtures of the ninth pass: builds /tmp/b9/work.
mkdir -p /tmp/b9/work/m && cp "$(dirname "$0")"/m/* /tmp/b9/work/m/ && cd /tmp/b9/work
export OMP_NUM_THREADS=1
P="flock /tmp/pipebench-cpu.lock timeout 300 /work/wt-ninth/.venv/bin/python -m pipebench"
[ -f p.json ] || $P plan --model mlp --flavour tiny --stages 2 --batch 8 --save-profile p.json --json plan.json
[ -d r0 ] || $P run --models mlp --flavour tiny --batch 8 --strategies single --steps 2 --warmup 1 --rounds 1 --out r0
[ -f ck.pt ] || $P train --model m/good.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu --save ck.pt
ls
[ -f adv.json ] || $P advise --profile p.json --stages 2 --json adv.json

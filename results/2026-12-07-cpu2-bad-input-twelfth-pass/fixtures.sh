# Fixtures of the tenth pass: builds /tmp/b12/work (the cache of this pass in /tmp/b12/cache).
mkdir -p /tmp/b12/work/m /tmp/b12/cache && cp "$(dirname "$0")"/m/* /tmp/b12/work/m/ && cd /tmp/b12/work
export OMP_NUM_THREADS=1 PIPEBENCH_CACHE=/tmp/b12/cache
P="timeout 300 /work/wt-twelfth/.venv/bin/python -m pipebench"
[ -f p.json ] || $P plan --model mlp --flavour tiny --stages 2 --batch 8 --device cpu --save-profile p.json --json plan.json
[ -f pg.json ] || $P plan --model m/good.py:Net --input-shape 4 --stages 2 --batch 8 --device cpu --save-profile pg.json
[ -d r0 ] || $P run --models mlp --flavour tiny --batch 8 --strategies single --steps 2 --warmup 1 --rounds 1 --device cpu --out r0
[ -f ck.pt ] || $P train --model m/good.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu --save ck.pt
[ -f adv.json ] || $P advise --profile p.json --stages 2 --json adv.json
[ -f ex_ds.json ] || $P plan --profile p.json --stages 2 --export deepspeed ex_ds.json
[ -d rep0 ] || $P report r0 --out rep0
$P plan --model mlp --flavour tiny --stages 2 --batch 8 --device cpu > /dev/null   # the cache answers it now
$P advise --model mlp --flavour tiny --stages 2 --batch 8 --device cpu > /dev/null
ls

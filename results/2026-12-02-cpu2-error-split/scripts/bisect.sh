#!/bin/bash
# The segments' sum over the whole step (ratio.py) with each commit's code, twice, under the timing lock:
#   flock /tmp/pipebench-timing.lock bash bisect.sh > bisect.log
# Each /tmp/pbc/<commit>/pkg is that commit laid out as an importable package: git archive <commit> | tar -x
# -C src; pkg/pipebench = src/pipebench with src/{bench,hardware,models,partition} copied into it ("base"
# is 6476916, "head" the installed checkout). ratio.py must sit outside any checkout (python puts its
# folder first on sys.path).
cd /tmp
for round in 1 2; do
for c in base 257a67c aab78be d3c3611 a166c93 18c2252 6cd7dc7 accd136 a80ef2b head; do
  for m in gpt resnet101; do
    if [ $c = head ]; then pp=""; else pp=/tmp/pbc/$c/pkg; fi
    out=$(PIPEBENCH_CACHE=off PYTHONPATH=$pp OMP_NUM_THREADS=1 /work/wt-errsplit/.venv/bin/python /tmp/pbc/ratio.py $m 2>&1 | tail -1)
    echo "round $round $c $out"
  done
done
done

#!/bin/bash
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

cd /tmp/b9/work; rm -f i1.csv i1.pt; rm -rf i1.pt.train
set -m
OMP_NUM_THREADS=1 /work/wt-ninth/.venv/bin/python /tmp/b9/work/m/dfl.py /work/wt-ninth/.venv/bin/python -m pipebench train --model m/good.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 400 --strategy pp-1f1b --device cpu --stages 2 --csv i1.csv --save i1.pt --log-every 50 > >(python3 -c "
import sys,time; t=time.time()
for l in sys.stdin: print(f'{time.time()-t:6.1f} {l.rstrip()[:110]}', flush=True)") 2>&1 &
pid=$!
sleep $1; kill -INT $pid; echo "sent INT at $1 s"
wait $pid; echo rc=$?; sleep 1

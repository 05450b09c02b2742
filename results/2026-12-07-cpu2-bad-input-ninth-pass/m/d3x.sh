# D3 retries at other moments: bash m/d3x.sh  (each under the lock; prints the delay, the exit line and whether 400/400 steps ran)
cd /tmp/b9/work; for d in 1 1 1 0.9 1.1 1.2 0.95 1.05 1.15; do flock /tmp/pipebench-cpu.lock bash m/int1.sh $d > /tmp/b9/d3_$d.txt 2>&1; echo "$d: $(tail -1 /tmp/b9/d3_$d.txt) $(grep -c 400/400 /tmp/b9/d3_$d.txt)"; done

# sig.sh TARGET SIGNAL DELAY [SIGNAL2 DELAY2] -- CMD...: start CMD (its own process group, SIGINT at its default), send
# SIGNAL after DELAY s to the process (TARGET=p) or its group (TARGET=g), and SIGNAL2 DELAY2 s later; 5 s after it ends,
# count the processes carrying our mark (ps), pipebench-* folders in its TMPDIR, and anything else there.
tgt=$1; sig=$2; delay=$3; shift 3; sig2=""; if [ "$1" != "--" ]; then sig2=$1; delay2=$2; shift 2; fi; shift
mark=b11mark$$; td=/tmp/b11/work/tmp_$mark; mkdir -p $td
set -m
env B11MARK=$mark TMPDIR=$td OMP_NUM_THREADS=1 /work/wt-eleventh/.venv/bin/python /tmp/b11/work/m/dfl.py "$@" >$td.out 2>$td.err & pid=$!
dest=$pid; [ "$tgt" = g ] && dest=-$pid
sleep $delay; kill -$sig -- $dest 2>/dev/null
if [ -n "$sig2" ]; then sleep $delay2; kill -$sig2 -- $dest 2>/dev/null; fi
wait $pid; rc=$?
sleep 5
alive=$(for f in /proc/[0-9]*/environ; do grep -lqz "B11MARK=$mark" $f 2>/dev/null && echo ${f#/proc/}; done | cut -d/ -f1)
left=$(echo -n "$alive" | grep -c .)
names=$(for p in $alive; do tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-90; echo -n '|'; done)
pbt=$(ls -A $td | grep -c '^pipebench')
echo "RC=$rc LEFT=$left PBTMP=$pbt INTMP=[$(ls -A $td | tr '\n' ' ')] ERRLINES=$(grep -c . $td.err) TB=$(grep -c Traceback $td.err) ERR=$(tail -1 $td.err) ALIVE=$names"
for p in $alive; do kill -9 $p 2>/dev/null; done
